"""A rewritten model's clusters as an NPU placement workload: each table of each ``ember.*``
cluster (one per part of a grouped call), with the bags one run of the model gives it.

The NPU strategies pool unweighted float32 sum bags (``emulator/npu``). The bags are the
kernels' plan (docs/CUSTOM_CALL.md): every lookup resolved (wrap_negative, 32-bit truncation,
clip) and listed per output row in lookup order (``segment_reduce``: a stable sort by segment
id, ids outside ``[0, S)`` dropped). What the NPU does not compute is applied after pooling,
exactly as the kernels do: ``mean`` scales the sum by ``1/count`` in f32, empty rows get
``init``, a ``fill`` lookup outside the table makes its row NaN (such lookups fetch nothing).
Clusters the strategies cannot pool (weighted, max/min/sqrt_n, bf16/f16, a sum with a nonzero
``init``) are refused with the reason (``NotPlaceable``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ember_xla.call_specs import (
    BACKWARD_ROLES,
    ClusterSpec,
    LoweringRefused,
    cluster_spec,
    ember_calls,
)
from ember_xla.emulator.npu.workload import Bags, Table
from ember_xla.ir.graph import Module


class NotPlaceable(ValueError):
    """A cluster the NPU lookup strategies cannot compute; the message says which and why."""


@dataclasses.dataclass
class PlacedTable:
    """One table of one cluster: its NPU table and bags, and what finishes its outputs."""

    cluster: str                  # the custom-call's name
    part: int
    table: Table
    bags: Bags
    counts: np.ndarray            # lookups per output row (NaN lookups included)
    nan_rows: np.ndarray          # bool per output row: a fill lookup outside the table
    combiner: str
    init: float

    def finish(self, pooled: np.ndarray) -> np.ndarray:
        """The cluster's output rows from the NPU's pooled sums."""
        out = np.asarray(pooled, dtype=np.float32).copy()
        if self.combiner == "mean":
            nz = self.counts > 0
            scale = np.float32(1) / self.counts[nz].astype(np.float32)
            out[nz] = out[nz] * scale[:, None]
        out[self.counts == 0] = np.float32(self.init)
        out[self.nan_rows] = np.float32("nan")
        return out


@dataclasses.dataclass
class ClusterTables:
    spec: ClusterSpec
    tables: list[PlacedTable]

    def outputs(self, pooled: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The custom-call's results (a concat target: the parts side by side)."""
        outs = [t.finish(p) for t, p in zip(self.tables, pooled, strict=True)]
        if self.spec.kind == "grouped_segment_reduce_concat":
            return [np.concatenate(outs, axis=1)]
        return outs


def placeable_clusters(module: Module) -> list[tuple[ClusterSpec | None, str, str | None]]:
    """Per ember call of ``module``'s entry, in graph order: (spec or None, name, why the NPU
    cannot compute it or None)."""
    out = []
    for op in ember_calls(module, module.entry):
        try:
            spec = cluster_spec(op)
        except LoweringRefused as e:
            out.append((None, op.name, str(e)))
            continue
        out.append((spec, op.name, refusal(spec)))
    return out


def refusal(spec: ClusterSpec) -> str | None:
    """Why the NPU strategies cannot compute ``spec``, or None."""
    if spec.kind in BACKWARD_ROLES:
        return (f"the backward of a lookup ({spec.kind}: a gradient scatter-add; the NPU "
                "strategies pool forward bags)")
    if spec.combiners:
        return (f"a multi-output call ({spec.kind}: one result per combiner; the NPU "
                "strategies pool one result per call)")
    if spec.weighted:
        return "weighted lookups (the NPU strategies pool unweighted bags)"
    if spec.combiner not in ("sum", "mean"):
        return f"combiner {spec.combiner} (the NPU strategies pool sums; sum and mean placed)"
    if spec.combiner == "sum" and spec.init != 0.0:
        return f"a sum starting from init={spec.init} (the NPU pools from 0)"
    for p in spec.parts:
        if p.table.dtype != "f32" or p.out.dtype != "f32":
            return f"table {p.table} -> {p.out.dtype} (the NPU strategies pool f32 tables)"
    return None


def resolve(ids: np.ndarray, rows: int, spec: ClusterSpec) -> tuple[np.ndarray, np.ndarray]:
    """(table row of each lookup, whether it is a ``fill``/``zero`` lookup outside the
    table)."""
    i = np.asarray(ids).astype(np.int64).ravel()
    if spec.wrap_negative:
        i = np.where(i < 0, i + rows, i)
    if spec.index_bits == 32:
        i = ((i + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    if spec.index_mode == "clip":
        return np.clip(i, 0, rows - 1), np.zeros(len(i), dtype=bool)
    bad = (i < 0) | (i >= rows)
    return np.where(bad, 0, i), bad


def _layout(spec: ClusterSpec, lookups: np.ndarray, layout: np.ndarray | None,
            n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(lookup positions in plan order, CSR offsets over them) per output row."""
    n = lookups.size
    if spec.kind == "padded_bag":
        p = lookups.shape[1] if lookups.ndim > 1 else 1
        return np.arange(n, dtype=np.int64), np.arange(n_rows + 1, dtype=np.int64) * p
    assert layout is not None
    if spec.kind == "offsets_bag":
        off = np.asarray(layout).astype(np.int64)
        return np.arange(off[0], off[-1], dtype=np.int64), off - off[0]
    seg = np.asarray(layout).astype(np.int64).ravel()
    keep = np.nonzero((seg >= 0) & (seg < n_rows))[0]
    order = keep[np.argsort(seg[keep], kind="stable")]
    counts = np.bincount(seg[keep], minlength=n_rows)
    return order, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def cluster_tables(spec: ClusterSpec, operands: Sequence[np.ndarray]) -> ClusterTables:
    """The NPU tables and bags of one cluster on one run's operands."""
    why = refusal(spec)
    if why is not None:
        raise NotPlaceable(f"cluster %{spec.name} ({spec.kind}): {why}")
    placed = []
    for k, part in enumerate(spec.parts):
        j = part.first_operand
        table = np.asarray(operands[j], dtype=np.float32)
        lookups = np.asarray(operands[j + 1])
        layout = None if part.layout is None else np.asarray(operands[j + 2])
        n_rows = part.out.shape[0]
        order, offsets = _layout(spec, lookups, layout, n_rows)
        src, bad = resolve(lookups.ravel()[order], table.shape[0], spec)
        counts = np.diff(offsets)
        row_of = np.repeat(np.arange(n_rows), counts)
        nan_rows = np.zeros(n_rows, dtype=bool)
        if spec.index_mode == "fill":  # "zero": the lookup adds a zero row, i.e. nothing
            nan_rows[row_of[bad]] = True
        good = ~bad
        kept = np.concatenate([[0], np.cumsum(np.bincount(row_of[good], minlength=n_rows))])
        name = spec.name if len(spec.parts) == 1 else f"{spec.name}.{k}"
        placed.append(PlacedTable(spec.name, k, Table(name, table.shape[0], table.shape[1],
                                                      weights=table),
                                  Bags(src[good], kept.astype(np.int64)), counts, nan_rows,
                                  spec.combiner, spec.init))
    return ClusterTables(spec, placed)
