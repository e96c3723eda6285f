"""Operations: a name (opcode), operands, typed results, attributes, owned regions and called
graphs. Typed op classes of the Ember dialects subclass ``Operation`` (see ``opdef.py``); HLO
uses it generically."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from ember_xla.ir.block import Block, Region
from ember_xla.ir.value import OpResult, Value

if TYPE_CHECKING:
    from ember_xla.ir.graph import Graph


#: (op class, trait) -> has it (traits are class constants; the interpreter asks per op run).
_TRAIT_CACHE: dict[tuple[type, type], bool] = {}


class Operation:
    """A generic operation.

    ``opcode`` names what it does (``"add"``, ``"slc.for"`` ...), ``name`` is its SSA name
    (unique inside an HLO graph; a print-name hint elsewhere), ``attributes`` maps attribute
    names to plain Python values (or ``ir.types`` types), ``regions`` are owned (loop bodies,
    callbacks) and ``callees`` lists the graphs it calls, in order (HLO's ``to_apply``, ``calls``,
    branches ...). ``parent`` is the block (an HLO graph is a block) the op sits in.
    """

    #: Trait classes (``ir.traits``) of this kind of op; typed op classes set them.
    traits: ClassVar[frozenset[type]] = frozenset()

    def __init__(
        self,
        opcode: str,
        operands: list[Value],
        result_types: list[Any],
        attributes: dict[str, Any] | None = None,
        callees: list[Graph] | None = None,
        name: str = "",
        regions: list[Region] | None = None,
    ) -> None:
        self.opcode = opcode
        self.name = name
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.callees: list[Graph] = list(callees or [])
        self.results: list[Value] = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.operands: list[Value] = []
        self.parent: Block | None = None
        self.id: int | None = None
        self.regions: list[Region] = []
        ops = self.operands
        for v in operands:  # _append_operand, inlined (HLO import makes millions of these)
            if not isinstance(v, Value):
                raise TypeError(
                    f"operand of {self.opcode} must be a Value, got {type(v).__name__}")
            v.uses.append((self, len(ops)))
            ops.append(v)
        for r in regions or ():
            self.add_region(r)

    # -- operands ---------------------------------------------------------------------------
    def _append_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"operand of {self.opcode} must be a Value, got {type(v).__name__}")
        v.uses.append((self, len(self.operands)))
        self.operands.append(v)

    def set_operand(self, pos: int, v: Value) -> None:
        old = self.operands[pos]
        old.uses.remove((self, pos))
        v.uses.append((self, pos))
        self.operands[pos] = v

    def drop_operands(self) -> None:
        """Forget all operands (removing this op from their use lists)."""
        for pos, v in enumerate(self.operands):
            v.uses.remove((self, pos))
        self.operands = []

    def drop_all_references(self) -> None:
        """Forget the operands of this op and of every op nested in its regions."""
        self.drop_operands()
        for r in self.regions:
            r.drop_all_references()

    # -- results ----------------------------------------------------------------------------
    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.opcode} has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def users(self) -> list[Operation]:
        out: dict[int, Operation] = {}
        for r in self.results:
            for u in r.users:
                out.setdefault(id(u), u)
        return list(out.values())

    # -- regions and structure --------------------------------------------------------------
    def add_region(self, region: Region) -> Region:
        if region.parent is not None:
            raise ValueError("region already belongs to an operation")
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def region(self) -> Region:
        if len(self.regions) != 1:
            raise ValueError(f"{self.opcode} has {len(self.regions)} regions, not one")
        return self.regions[0]

    @property
    def body(self) -> Block:
        """The single block of the single region."""
        return self.region.block

    @property
    def parent_op(self) -> Operation | None:
        return self.parent.parent_op if self.parent is not None else None

    def walk(self) -> Iterator[Operation]:
        """This op, then every op nested in its regions (pre-order)."""
        yield self
        for r in self.regions:
            for b in r.blocks:
                for op in list(b.ops):
                    yield from op.walk()

    @classmethod
    def has_trait(cls, trait: type) -> bool:
        key = (cls, trait)
        hit = _TRAIT_CACHE.get(key)
        if hit is None:
            hit = _TRAIT_CACHE[key] = any(issubclass(t, trait) for t in cls.traits)
        return hit

    def verify_(self) -> None:
        """Op-specific checks (typed op classes override; raise ``VerifyError``)."""

    # -- copies -----------------------------------------------------------------------------
    def clone(self, operands: list[Value] | None = None,
              value_map: dict[Value, Value] | None = None) -> Operation:
        """A detached deep copy: attributes deep-copied, regions cloned. Operands are
        ``operands`` if given, else this op's operands mapped through ``value_map``; values
        defined inside the cloned regions are remapped, values from outside them are read
        through ``value_map`` when present there (else shared). ``value_map`` gains this op's
        results -> the copy's results."""
        vmap = {} if value_map is None else value_map
        if operands is None:
            operands = [vmap.get(v, v) for v in self.operands]
        op = type(self).__new__(type(self))
        Operation.__init__(op, self.opcode, operands, [r.type for r in self.results],
                           copy.deepcopy(self.attributes), list(self.callees), self.name)
        for old, new in zip(self.results, op.results, strict=True):
            new.name_hint = old.name_hint
            vmap[old] = new
        for r in self.regions:
            op.add_region(clone_region(r, vmap))
        return op

    def __repr__(self) -> str:
        ins = ", ".join(getattr(v.owner, "name", "?") or "?" for v in self.operands)
        return f"<Operation {self.name} = {self.opcode}({ins})>"


def clone_region(region: Region, vmap: dict[Value, Value]) -> Region:
    """Deep copy of ``region``; ``vmap`` maps old values to new ones and is extended."""
    new = Region()
    for b in region.blocks:
        nb = Block()
        for a in b.args:
            vmap[a] = nb.add_arg(a.type, a.name_hint)
        new.add_block(nb)
        for op in b.ops:
            nb.append(op.clone(value_map=vmap))
    return new
