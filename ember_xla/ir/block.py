"""Blocks (arguments + an ordered list of operations) and regions (the blocks an operation
owns: a loop body, a callback, one case of a compute loop)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ember_xla.ir.value import BlockArgument

if TYPE_CHECKING:
    from ember_xla.ir.operation import Operation


class Block:
    """Arguments and operations in order. ``parent`` is the owning ``Region`` (``None`` for a
    detached block or a module-level graph)."""

    def __init__(self, arg_types: Iterable[Any] = ()) -> None:
        self.args: list[BlockArgument] = []
        self.ops: list[Operation] = []
        self.parent: Region | None = None
        for t in arg_types:
            self.add_arg(t)

    # -- arguments --------------------------------------------------------------------------
    def add_arg(self, type_: Any, name: str | None = None) -> BlockArgument:
        arg = BlockArgument(type_, self, len(self.args))
        arg.name_hint = name
        self.args.append(arg)
        return arg

    def erase_arg(self, arg: BlockArgument) -> None:
        if arg.uses:
            raise ValueError(f"cannot erase block argument #{arg.index}: it still has uses")
        self.args.remove(arg)
        for i, a in enumerate(self.args):
            a.index = i

    # -- operations -------------------------------------------------------------------------
    def _adopt(self, op: Operation) -> None:
        if op.parent is not None:
            raise ValueError(f"{op.opcode} {op.name!r} already belongs to a block")
        op.parent = self

    def insert(self, index: int, op: Operation) -> Operation:
        self._adopt(op)
        self.ops.insert(index, op)
        return op

    def append(self, op: Operation) -> Operation:
        return self.insert(len(self.ops), op)

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        return self.insert(self.index_of(anchor), op)

    def insert_after(self, anchor: Operation, op: Operation) -> Operation:
        return self.insert(self.index_of(anchor) + 1, op)

    def detach(self, op: Operation) -> Operation:
        """Take ``op`` out of this block, keeping its operands and uses (to move it)."""
        self.ops.pop(self.index_of(op))
        op.parent = None
        return op

    def erase(self, op: Operation) -> None:
        """Remove an op whose results have no users left (its regions are dropped too)."""
        if op.users:
            names = ", ".join(u.name or u.opcode for u in op.users)
            raise ValueError(f"cannot erase {op.name or op.opcode}: still used by {names}")
        self.detach(op)
        op.drop_all_references()

    def index_of(self, op: Operation) -> int:
        for i, o in enumerate(self.ops):
            if o is op:
                return i
        raise ValueError(f"{op.opcode} {op.name!r} is not in this block")

    # -- structure --------------------------------------------------------------------------
    @property
    def parent_op(self) -> Operation | None:
        return self.parent.parent if self.parent is not None else None

    @property
    def terminator(self) -> Operation | None:
        from ember_xla.ir.traits import IsTerminator

        if self.ops and self.ops[-1].has_trait(IsTerminator):
            return self.ops[-1]
        return None

    def walk(self) -> Iterator[Operation]:
        """Every op of this block and of the regions nested in it, pre-order."""
        for op in list(self.ops):
            yield from op.walk()

    def encloses(self, other: Block) -> bool:
        """True when ``other`` is this block or nested (at any depth) inside one of its ops."""
        b: Block | None = other
        while b is not None:
            if b is self:
                return True
            parent_op = b.parent_op
            b = parent_op.parent if parent_op is not None else None
        return False

    def __iter__(self) -> Iterator[Operation]:
        return iter(list(self.ops))

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return f"<Block: {len(self.args)} args, {len(self.ops)} ops>"


class Region:
    """The blocks an operation owns (the Ember levels use single-block regions)."""

    def __init__(self, blocks: Iterable[Block] = ()) -> None:
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        if block.parent is not None:
            raise ValueError("block already belongs to a region")
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The only block (single-block regions)."""
        if len(self.blocks) != 1:
            raise ValueError(f"region has {len(self.blocks)} blocks, not one")
        return self.blocks[0]

    def walk(self) -> Iterator[Operation]:
        for b in self.blocks:
            yield from b.walk()

    def drop_all_references(self) -> None:
        for b in self.blocks:
            for op in b.ops:
                op.drop_all_references()

    def __repr__(self) -> str:
        return f"<Region: {len(self.blocks)} blocks>"
