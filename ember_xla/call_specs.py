"""The ember custom-calls of a rewritten HLO module: ``ember_calls`` enumerates them (the one
enumeration the compiler, the emulator, capture and placement share) and ``cluster_spec`` reads
one into a ``ClusterSpec``: the
kind, the operands' roles, shapes and dtypes, the output shapes and dtypes, and the kernel
attributes (docs/CUSTOM_CALL.md). Everything the contract does not allow is refused with
``LoweringRefused`` and a reason (the lowering never guesses)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.custom_calls import (
    MINMAX_ORDERS,
    SUM_ORDERS,
    TARGETS,
    call_attributes,
    is_ember_call,
)
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation

TABLE_DTYPES = ("f32", "bf16", "f16")
ID_DTYPES = ("s32", "s64")
COMBINERS = ("sum", "max", "min", "mean", "sqrt_n")
INDEX_MODES = ("clip", "fill", "zero")


class LoweringRefused(ValueError):
    """A cluster (or a form of it) the DAE lowering does not handle; the message says why."""


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """Shape and HLO element type (``f32``, ``bf16``, ``s32`` ...) of one operand/result."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclasses.dataclass(frozen=True)
class Part:
    """One table's sub-program: its operands by role and its output (k parts for grouped)."""

    table: ArraySpec
    lookups: ArraySpec               # indices (segment_reduce, offsets_bag) or ids (padded)
    layout: ArraySpec | None         # segment_ids or offsets (None for padded_bag)
    weights: ArraySpec | None
    out: ArraySpec
    first_operand: int               # position of this part's table among the call's operands


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    kind: str                        # segment_reduce | padded_bag | offsets_bag | grouped_...
    name: str                        # the custom-call's instruction name
    operands: tuple[ArraySpec, ...]
    roles: tuple[str, ...]
    outputs: tuple[ArraySpec, ...]   # the call's results (concat: one; its parts' slices in
                                     # ``parts[k].out``)
    combiner: str
    index_mode: str
    wrap_negative: bool
    weighted: bool
    init: float
    index_bits: int
    parts: tuple[Part, ...]
    outlined: str | None = None      # name of the outlined reference computation, if any
    # padded_bag: the order of the native kernel's additions (a DAE program adds a bag's rows
    # one after the other whatever it says; dae_target/check.py compares it with the kernel
    # in that order, and with XLA to a tolerance)
    sum_order: str = "sequential"
    # multi_segment_reduce: (combiner, init) per result (``combiner``/``init``: the first's)
    combiners: tuple[tuple[str, float], ...] = ()
    # sparse_rowwise_adagrad: lr is a module constant XLA multiplies into the row's factor
    lr_folded: bool = False

    def members(self) -> tuple[ClusterSpec, ...]:
        """A multi_segment_reduce call as the segment_reduce of each of its results (what
        the kernel computes for each, bit for bit); any other call: itself."""
        if self.kind != "multi_segment_reduce":
            return (self,)
        part = self.parts[0]
        return tuple(dataclasses.replace(
            self, kind="segment_reduce", outputs=(o,), combiner=c, init=v, combiners=(),
            parts=(dataclasses.replace(part, out=o),)) for o, (c, v) in
            zip(self.outputs, self.combiners, strict=True))

    @property
    def attrs(self) -> dict[str, Any]:
        return {"combiner": self.combiner, "index_mode": self.index_mode,
                "wrap_negative": self.wrap_negative, "weighted": self.weighted,
                "init": self.init, "index_bits": self.index_bits,
                **({"sum_order": self.sum_order, "row_type": ""} if self.kind == "padded_bag"
                   else {})}


def _array(shape: Any, where: str) -> ArraySpec:
    if getattr(shape, "tuple_shapes", ()) or shape.element_type in ("tuple", "token"):
        raise LoweringRefused(f"{where}: expected an array, got {shape}")
    return ArraySpec(tuple(int(d) for d in shape.dims), str(shape.element_type))


def _check_part(kind: str, p: Part, where: str) -> None:
    t, lk, out = p.table, p.lookups, p.out
    if len(t.shape) != 2 or t.dtype not in TABLE_DTYPES:
        raise LoweringRefused(f"{where}: table {t} is not [N,D] of {'/'.join(TABLE_DTYPES)}")
    if out.dtype != t.dtype and not (out.dtype == "f32" and t.dtype in ("bf16", "f16")):
        raise LoweringRefused(f"{where}: result {out.dtype} for a {t.dtype} table")
    if len(out.shape) != 2 or out.shape[1] != t.shape[1]:
        raise LoweringRefused(f"{where}: result {out} is not [rows, D={t.shape[1]}]")
    for a in (lk, p.layout):
        if a is not None and a.dtype not in ID_DTYPES:
            raise LoweringRefused(f"{where}: {a} is not an s32/s64 index array")
    n_lookups = _size(lk.shape)
    if kind == "padded_bag":
        b = out.shape[0]
        if not lk.shape or lk.shape[0] != b or not _flat_ok(lk.shape, 2):
            raise LoweringRefused(f"{where}: ids {lk} are not [B={b},P] (or [B,P,1])")
    else:
        if not _flat_ok(lk.shape, 1):
            raise LoweringRefused(f"{where}: indices {lk} are not one-dimensional")
        assert p.layout is not None
        if kind == "offsets_bag":
            if len(p.layout.shape) != 1 or p.layout.shape[0] != out.shape[0] + 1:
                raise LoweringRefused(f"{where}: offsets {p.layout} are not [B+1] for "
                                      f"{out.shape[0]} bags")
        elif _size(p.layout.shape) != n_lookups or not _flat_ok(p.layout.shape, 1):
            raise LoweringRefused(f"{where}: segment ids {p.layout} do not match {lk}")
    w = p.weights
    if w is not None:
        if w.dtype not in (t.dtype, out.dtype):
            raise LoweringRefused(f"{where}: weights {w.dtype} are neither the table's nor the "
                                  "result's type")
        if _size(w.shape) != n_lookups or not (
                w.shape == lk.shape or len(w.shape) == 1 or _flat_ok(w.shape, len(lk.shape))):
            raise LoweringRefused(f"{where}: weights {w} are not one per lookup of {lk}")


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _flat_ok(shape: tuple[int, ...], rank: int) -> bool:
    """``shape`` has ``rank`` dims, possibly followed by trailing 1s."""
    return len(shape) >= rank and all(d == 1 for d in shape[rank:])


def _concat_parts(result: ArraySpec, operands: tuple[ArraySpec, ...], n_roles: int,
                  where: str) -> tuple[ArraySpec, ...]:
    """Per table, its slice ``[S, D_k]`` of a concat target's one ``[S, sum D_k]`` result."""
    tables = operands[::n_roles]
    if len(result.shape) != 2 or any(len(t.shape) != 2 for t in tables):
        raise LoweringRefused(f"{where}: result {result} and tables are not rank 2")
    if sum(t.shape[1] for t in tables) != result.shape[1] or len(operands) % n_roles:
        raise LoweringRefused(f"{where}: result {result} is not the tables' rows side by side")
    return tuple(ArraySpec((result.shape[0], t.shape[1]), result.dtype) for t in tables)


def cluster_spec(op: Operation) -> ClusterSpec:
    """The spec of one ember custom-call (``LoweringRefused`` if it cannot be lowered)."""
    if not is_ember_call(op):
        raise LoweringRefused(f"{op.name}: not an ember custom-call")
    target = TARGETS[op.attributes["custom_call_target"]]
    where = f"{target.name} %{op.name}"
    if target.direction == "backward":
        return _backward_spec(op, target.kind, where)
    try:
        attrs = call_attributes(op)
    except ValueError as e:
        raise LoweringRefused(f"{where}: {e}") from None
    combiners = _multi_combiners(attrs, where) if "combiner" not in target.attributes else ()
    if combiners:  # ember.multi_segment_reduce: one result per combiner
        attrs = {**attrs, "combiner": combiners[0][0], "init": combiners[0][1]}
    missing = [k for k in target.attributes if k not in attrs]
    if missing:
        raise LoweringRefused(f"{where}: attributes missing: {', '.join(missing)}")
    combiner, mode, bits = attrs["combiner"], attrs["index_mode"], attrs["index_bits"]
    if attrs.get("sum_order") in MINMAX_ORDERS:
        raise LoweringRefused(f"{where}: a max/min padded bag with XLA:CPU's NaN and signed-zero "
                              f"semantics (sum_order={attrs['sum_order']}, the CPU kernel's) is "
                              "not in the DAE contract; emulate the original model, whose "
                              "max/min bags stay in XLA for the DAE machine")
    if attrs.get("row_type", ""):
        raise LoweringRefused(f"{where}: a padded bag reading an f32 table's rows as "
                              f"{attrs['row_type']} (row_type={attrs['row_type']}, the CPU "
                              "kernel's) is not in the DAE contract; lower the original model, "
                              "whose rewrite for the DAE machine reads the converted table")
    if attrs.get("sum_order", "sequential") not in SUM_ORDERS:
        raise LoweringRefused(f"{where}: sum_order={attrs['sum_order']!r} is not one of "
                              f"{', '.join(SUM_ORDERS)}")
    for c in [c for c, _ in combiners] or [combiner]:
        if c not in COMBINERS:
            raise LoweringRefused(f"{where}: combiner {c!r} not in {COMBINERS}")
    if mode not in INDEX_MODES:
        raise LoweringRefused(f"{where}: index_mode {mode!r} not in {INDEX_MODES}")
    if bits not in (32, 64):
        raise LoweringRefused(f"{where}: index_bits {bits} is not 32 or 64")
    operands = tuple(_array(v.type, f"{where} operand {i}") for i, v in enumerate(op.operands))
    rt = op.results[0].type
    results: tuple[ArraySpec, ...] | None = None  # a concat target's one result
    if target.kind == "grouped_segment_reduce_concat":
        results = (_array(rt, f"{where} result"),)
        outs = _concat_parts(results[0], operands, len(target.operand_roles), where)
    else:
        outs = (tuple(_array(s, f"{where} result") for s in rt.tuple_shapes)
                if target.grouped or combiners else (_array(rt, f"{where} result"),))
    if combiners and len(combiners) != len(outs):
        raise LoweringRefused(f"{where}: {len(combiners)} combiners for {len(outs)} results")
    weighted = bool(attrs["weighted"])
    n_roles = len(target.operand_roles)
    if target.grouped:
        if weighted:
            raise LoweringRefused(f"{where}: a weighted grouped call is not in the contract")
        if not operands or len(operands) % n_roles or len(operands) // n_roles != len(outs):
            raise LoweringRefused(f"{where}: {len(operands)} operands for {len(outs)} results")
        roles = target.operand_roles * len(outs)
    else:
        if (len(operands) == n_roles + int(weighted) + 1
                and operands[-1].dtype == "pred"):
            raise LoweringRefused(f"{where}: a masked padded bag (the CPU kernel's mask "
                                  "operand) is not in the DAE contract; lower the original "
                                  "model, whose masked bags become segment reductions")
        if len(operands) != n_roles + int(weighted):
            raise LoweringRefused(f"{where}: {len(operands)} operands, weighted={weighted}; "
                                  f"expected {n_roles + int(weighted)}")
        roles = target.operand_roles + (("weights",) if weighted else ())
    parts = []
    for k in range(1 if combiners else len(outs)):
        base = k * n_roles
        layout = operands[base + 2] if n_roles == 3 else None
        w = operands[-1] if weighted else None
        part = Part(operands[base], operands[base + 1], layout, w, outs[k], base)
        _check_part(target.kind, part, where + (f" table {k}" if target.grouped else ""))
        parts.append(part)
    for k, o in enumerate(outs[1:] if combiners else ()):  # every result as the first
        _check_part(target.kind, dataclasses.replace(parts[0], out=o), f"{where} result {k + 1}")
    return ClusterSpec(target.kind, op.name, operands, tuple(roles), results or outs, combiner,
                       mode,
                       bool(attrs["wrap_negative"]), weighted, float(attrs["init"]), int(bits),
                       tuple(parts), op.callees[0].name if op.callees else None,
                       str(attrs.get("sum_order", "sequential")), combiners)


def _multi_combiners(attrs: dict[str, Any], where: str) -> tuple[tuple[str, float], ...]:
    """``combiners="sum,max"``, ``inits="0.0,-inf"`` as ((combiner, init), ...)."""
    try:
        names = str(attrs["combiners"]).split(",")
        inits = [float(x) for x in str(attrs["inits"]).split(",")]
    except (KeyError, ValueError) as e:
        raise LoweringRefused(f"{where}: combiners/inits unreadable ({e})") from None
    if len(names) != len(inits) or not names:
        raise LoweringRefused(f"{where}: {len(names)} combiners, {len(inits)} inits")
    return tuple(zip((n.strip() for n in names), inits, strict=True))


#: Operand roles of the backward targets: the plain form, then the gathered form's extra
#: trailing operands (the updates operand is then ``source``: one gradient row per segment).
BACKWARD_ROLES = {"scatter_grad": ("indices", "updates"),
                  "sparse_sgd": ("table", "indices", "updates", "scale"),
                  "sparse_adagrad": ("table", "accumulator", "indices", "updates", "scale",
                                     "eps"),
                  "sparse_adagrad_keras": ("table", "accumulator", "indices", "updates",
                                           "scale", "eps"),
                  "sparse_rowwise_adagrad": ("table", "accumulator", "indices", "updates",
                                             "scale", "eps"),
                  "ordered_scatter": ("operand", "indices", "updates")}
BACKWARD_LOWERED = tuple(BACKWARD_ROLES)
#: the backward kinds whose results start as operands (updated in place): per output, the
#: role of the operand it starts as
IN_PLACE = {"sparse_sgd": ("table",), "sparse_adagrad": ("table", "accumulator"),
            "sparse_adagrad_keras": ("table", "accumulator"),
            "sparse_rowwise_adagrad": ("table", "accumulator"), "ordered_scatter": ("operand",)}
#: the row-wise sums of squares the lowering states (native/rowwise_adagrad.cc's SumOrder)
ROWWISE_SUM_ORDERS = ("blocked16", "sequential")


def _backward_spec(op: Operation, kind: str, where: str) -> ClusterSpec:
    """The spec of a lookup's gradient (``scatter_grad``) or fused update: ``out[indices[i]]
    += updates[i]`` (gathered form: ``source[clamp(source_rows[i])]``, skipped where
    ``mask[i]`` is false), indices outside ``[0, V)`` dropped. Its one part reads the gradient
    rows as its "table" (``lookups`` = the rows written, ``layout`` = ``source_rows``)."""
    if kind not in BACKWARD_LOWERED:
        raise LoweringRefused(f"{where}: the backward {kind} has no DAE lowering; it runs "
                              "natively")
    attrs = _backward_attributes(op, kind, where)
    base = BACKWARD_ROLES[kind]
    operands = tuple(_array(v.type, f"{where} operand {i}") for i, v in enumerate(op.operands))
    extra = len(operands) - len(base)
    if extra not in ((0,) if kind == "ordered_scatter" else (0, 1, 2)):
        raise LoweringRefused(f"{where}: {len(operands)} operands; expected {len(base)} "
                              f"({', '.join(base)}) plus source_rows [and mask]")
    roles = base if not extra else tuple("source" if r == "updates" else r for r in base) + (
        ("source_rows", "mask")[:extra])
    rt = op.results[0].type
    outs = (tuple(_array(s, f"{where} result") for s in rt.tuple_shapes)
            if getattr(rt, "tuple_shapes", ()) else (_array(rt, f"{where} result"),))
    role = dict(zip(roles, operands, strict=True))
    out = outs[0]
    rows = role.get("source", role.get("updates"))
    ids, src_rows, mask = role["indices"], role.get("source_rows"), role.get("mask")
    if len(out.shape) != 2 or out.dtype not in TABLE_DTYPES:
        raise LoweringRefused(f"{where}: result {out} is not [V,D] of {'/'.join(TABLE_DTYPES)}")
    if rows.dtype != out.dtype or len(rows.shape) != 2 or rows.shape[1] != out.shape[1]:
        raise LoweringRefused(f"{where}: gradient rows {rows} are not [*, D] of the result's "
                              f"type {out}")
    n = ids.shape[0] if len(ids.shape) == 1 else -1
    if ids.dtype not in ID_DTYPES or n < 0:
        raise LoweringRefused(f"{where}: indices {ids} are not one s32/s64 id per update")
    if src_rows is None and rows.shape[0] != n:
        raise LoweringRefused(f"{where}: updates {rows} are not one row per index of {ids}")
    if src_rows is not None and (src_rows.dtype not in ID_DTYPES or src_rows.shape != (n,)
                                 or rows.shape[0] < 1):
        raise LoweringRefused(f"{where}: source rows {src_rows} are not one s32/s64 row per "
                              f"index of {ids} into a non-empty {rows}")
    if mask is not None and (mask.dtype != "pred" or mask.shape != (n,)):
        raise LoweringRefused(f"{where}: mask {mask} is not pred[{n}]")
    if kind in IN_PLACE:
        _check_in_place(kind, role, outs, where)
    bits = 32 if (src_rows or ids).dtype == "s32" else 64
    first = roles.index("source" if src_rows is not None else "updates")
    part = Part(rows, ids, src_rows, None, out, first)
    return ClusterSpec(kind, op.name, operands, roles, outs, attrs.get("combiner", "sum"),
                       "clip", False, False, 0.0, bits, (part,),
                       op.callees[0].name if op.callees else None,
                       attrs.get("sum_order", "sequential"), (),
                       bool(attrs.get("lr_folded", False)))


def _backward_attributes(op: Operation, kind: str, where: str) -> dict[str, Any]:
    """The kernel attributes a backward kind's lowering reads, checked (``ordered_scatter``:
    combiner; ``sparse_rowwise_adagrad``: lr_folded, sum_order)."""
    if kind not in ("ordered_scatter", "sparse_rowwise_adagrad"):
        return {}
    try:
        attrs = call_attributes(op)
    except ValueError as e:
        raise LoweringRefused(f"{where}: {e}") from None
    if kind == "ordered_scatter":
        if attrs.get("combiner") not in ("add", "subtract"):
            raise LoweringRefused(f"{where}: combiner {attrs.get('combiner')!r} is not add or "
                                  "subtract")
        return {"combiner": str(attrs["combiner"])}
    if attrs.get("sum_order") not in ROWWISE_SUM_ORDERS or "lr_folded" not in attrs:
        raise LoweringRefused(f"{where}: sum_order {attrs.get('sum_order')!r} is not one of "
                              f"{', '.join(ROWWISE_SUM_ORDERS)} or lr_folded is missing")
    return {"sum_order": str(attrs["sum_order"]), "lr_folded": bool(attrs["lr_folded"])}


def _check_in_place(kind: str, role: dict[str, ArraySpec], outs: tuple[ArraySpec, ...],
                    where: str) -> None:
    """An update in place: f32 results of their operands' shapes, f32[] scalars, and (the
    rowwise update) an accumulator of one value per row."""
    starts = IN_PLACE[kind]
    if len(outs) != len(starts):
        raise LoweringRefused(f"{where}: {len(outs)} results; expected {len(starts)} "
                              f"({', '.join(starts)})")
    table = role[starts[0]]
    for r, o in zip(starts, outs, strict=True):
        if role[r] != o or o.dtype != "f32":
            raise LoweringRefused(f"{where}: {r} {role[r]} and its result {o} are not one f32 "
                                  "shape")
    want = (table.shape[0],) if kind == "sparse_rowwise_adagrad" else table.shape
    if "accumulator" in role and role["accumulator"].shape != want:
        raise LoweringRefused(f"{where}: accumulator {role['accumulator']} is not f32"
                              f"[{','.join(map(str, want))}] for table {table}")
    for r in ("scale", "eps"):
        if r in role and role[r] != ArraySpec((), "f32"):
            raise LoweringRefused(f"{where}: {r} {role[r]} is not f32[]")


def ember_calls(module: Module, graph: Graph | None = None) -> list[Operation]:
    """The ember custom-calls of a (rewritten) HLO module, in graph order (of ``graph`` only,
    when given): the one enumeration every consumer of a rewritten module uses."""
    graphs = module.graphs if graph is None else [graph]
    return [op for g in graphs for op in g.ops if is_ember_call(op)]
