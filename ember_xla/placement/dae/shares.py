"""Shares of one cluster's batch: the operands of the output rows ``[start, stop)``, so that a
share is the cluster's own program run on them and the shares' outputs, stacked in row order
(each output on its own), are the cluster's outputs bit for bit.

- ``padded_bag``: the rows of the ids (and weights) matrix.
- ``offsets_bag``: the offsets ``[start, stop]`` (they index the whole indices array).
- ``segment_reduce`` and ``grouped_segment_reduce`` (a table-batched call: every table's
  result has the same rows, each table's share is cut alike; the concatenating form's one
  result likewise): the lookups whose segment id
  is in ``[start, stop)``, in their original order (sorted or not: a segment's lookups keep
  their order, so its reduction adds them as the whole call does), their ids rebased to
  ``start`` (lookups outside ``[0, segments)`` are dropped by the reduction and belong to no
  share).
- the backward kinds (``scatter_grad``, ``sparse_sgd``, ``sparse_adagrad``,
  ``sparse_rowwise_adagrad``, ``ordered_scatter``: results written at the ids) are cut by rows
  of the table, not by batch: a share owns the result rows ``[start, stop)`` and gets the
  updates whose id is in that range, in their original order, their ids rebased to ``start``
  (with their source rows, mask or update rows; the gathered form's source stays whole), and
  the rows ``[start, stop)`` of the operands updated in place (table, accumulator, operand).
  No two shares write one row, so there is no read-modify-write hazard across cores, and
  every duplicate id is added on one core in XLA's order (ids outside ``[0, V)`` are dropped
  by every share, as by the whole call). A share's ``lookups`` are its ids in the table's own
  numbering.
Every other cluster (a grouped call whose tables' results differ in rows) runs whole; the
reason is ``whole_only``. Lookups of several tables are told apart as rows of one address
space (``lookups``: table k's ids offset by the rows of the tables before it)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.call_specs import ClusterSpec

#: cut by rows of the table (the result rows they write), not by batch
BY_TABLE_ROWS = ("scatter_grad", "sparse_sgd", "sparse_adagrad", "sparse_adagrad_keras",
                 "sparse_rowwise_adagrad",
                 "ordered_scatter")
#: the operands a backward share cuts by rows (updated in place: their rows are its result's)
_BY_ROWS = ("table", "accumulator", "operand")
SHAREABLE = ("padded_bag", "offsets_bag", "segment_reduce", "grouped_segment_reduce",
             "grouped_segment_reduce_concat", "multi_segment_reduce", *BY_TABLE_ROWS)
#: the per-update operands of a backward call (cut alike, in their order)
_PER_UPDATE = ("indices", "updates", "source_rows", "mask")


@dataclasses.dataclass(frozen=True)
class Share:
    operands: list[np.ndarray]
    output_shapes: list[tuple[int, ...]]
    lookups: np.ndarray            # the table rows this share looks up (flat ids)


def whole_only(spec: ClusterSpec, operands: list[np.ndarray]) -> str | None:
    """Why the cluster cannot be split by batch (None: it can)."""
    if spec.kind not in SHAREABLE:
        return f"{spec.kind} calls run whole"
    n = rows(spec)
    if any(int(o.shape[0]) != n for o in spec.outputs):
        return "its tables' results differ in rows"
    return None


def rows(spec: ClusterSpec) -> int:
    """The output rows (bags or segments) a share is a range of."""
    return int(spec.outputs[0].shape[0])


def share(spec: ClusterSpec, operands: list[np.ndarray], start: int, stop: int) -> Share:
    """The operands of output rows ``[start, stop)``; the whole cluster for ``[0, rows)``."""
    n = rows(spec)
    if not 0 <= start <= stop <= n:
        raise ValueError(f"share [{start}, {stop}) is not within the {n} rows of %{spec.name}")
    if start == 0 and stop == n:
        return Share(list(operands), [tuple(o.shape) for o in spec.outputs],
                     _ids(spec, operands))
    why = whole_only(spec, operands)
    if why is not None:
        raise ValueError(f"%{spec.name} cannot be split by batch: {why}")
    if spec.kind in BY_TABLE_ROWS:
        return _table_rows_share(spec, operands, start, stop)
    ops = list(operands)
    wk = len(ops) - 1 if spec.weighted else None
    looked: list[np.ndarray] = []
    for part in spec.parts:
        k = part.first_operand
        if spec.kind == "padded_bag":
            ops[k + 1] = np.ascontiguousarray(ops[k + 1][start:stop])
            if wk is not None:
                ops[wk] = np.ascontiguousarray(ops[wk][start:stop])
            looked.append(np.asarray(ops[k + 1]).reshape(-1))
        elif spec.kind == "offsets_bag":
            off = np.asarray(ops[k + 2])
            ops[k + 2] = np.ascontiguousarray(off[start:stop + 1])
            looked.append(np.asarray(ops[k + 1]).reshape(-1)[int(off[start]):int(off[stop])])
        else:
            seg = np.asarray(ops[k + 2])
            flat = seg.reshape(-1)
            keep = (flat >= start) & (flat < stop)
            ops[k + 1] = _kept(ops[k + 1], keep)
            ops[k + 2] = _kept((seg - seg.dtype.type(start)).astype(seg.dtype), keep)
            if wk is not None:
                ops[wk] = _kept(ops[wk], keep)
            looked.append(ops[k + 1])
    shapes = [(stop - start, *o.shape[1:]) for o in spec.outputs]
    return Share(ops, shapes, _flat_rows(spec, looked))


def lookup_operand(spec: ClusterSpec, k: int) -> int:
    """The operand holding part ``k``'s ids (a backward call's: the rows it writes)."""
    if spec.kind in BY_TABLE_ROWS:
        return spec.roles.index("indices")
    return spec.parts[k].first_operand + 1


def _table_rows_share(spec: ClusterSpec, operands: list[np.ndarray], start: int,
                      stop: int) -> Share:
    """A backward call's share: the result rows ``[start, stop)`` and the updates they get."""
    ops = list(operands)
    ids = np.asarray(ops[spec.roles.index("indices")])
    keep = (ids >= start) & (ids < stop)
    for i, role in enumerate(spec.roles):
        if role in _PER_UPDATE:
            ops[i] = _kept(ops[i], keep)
    k = spec.roles.index("indices")
    ops[k] = np.ascontiguousarray(ops[k] - ops[k].dtype.type(start))
    for i, role in enumerate(spec.roles):
        if role in _BY_ROWS:
            ops[i] = np.ascontiguousarray(np.asarray(ops[i])[start:stop])
    shapes = [(stop - start, *o.shape[1:]) for o in spec.outputs]
    return Share(ops, shapes, ids[keep].astype(np.int64))


def _kept(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The lookups ``keep`` selects of a per-lookup operand, its shape kept but the first."""
    a = np.asarray(a)
    if a.ndim and a.shape[0] == keep.size:
        return np.ascontiguousarray(a[keep])
    return np.ascontiguousarray(a.reshape(-1)[keep])


def _flat_rows(spec: ClusterSpec, ids: list[np.ndarray]) -> np.ndarray:
    """The parts' ids as rows of one address space (table k's offset by the rows before it)."""
    if not ids:
        return np.zeros(0, np.int64)
    base = np.cumsum([0] + [int(p.table.shape[0]) for p in spec.parts])
    return np.concatenate([np.asarray(x).reshape(-1).astype(np.int64) + int(b)
                           for x, b in zip(ids, base, strict=False)])


def _ids(spec: ClusterSpec, operands: list[np.ndarray]) -> np.ndarray:
    if spec.kind in BY_TABLE_ROWS:
        ids = np.asarray(operands[lookup_operand(spec, 0)]).reshape(-1).astype(np.int64)
        return ids[(ids >= 0) & (ids < rows(spec))]
    return _flat_rows(spec, [np.asarray(operands[lookup_operand(spec, k)]).reshape(-1)
                             for k in range(len(spec.parts))])


def ids_prefix(spec: ClusterSpec, operands: list[np.ndarray]) -> np.ndarray:
    """``p[r]``: the lookups of output rows ``[0, r)`` (``rows + 1`` entries)."""
    n = rows(spec)
    if whole_only(spec, operands) is not None:
        total = len(_ids(spec, operands))
        return np.round(np.linspace(0, total, n + 1)).astype(np.int64)
    out = np.zeros(n + 1, np.int64)
    if spec.kind in BY_TABLE_ROWS:
        out[1:] = np.cumsum(np.bincount(_ids(spec, operands), minlength=n)[:n])
        return out
    for part in spec.parts:
        k = part.first_operand
        if spec.kind == "padded_bag":
            per = int(np.asarray(operands[k + 1]).size // max(n, 1))
            out += np.arange(n + 1, dtype=np.int64) * per
        elif spec.kind == "offsets_bag":
            off = np.asarray(operands[k + 2]).astype(np.int64)
            out += off - off[0]
        else:
            seg = np.asarray(operands[k + 2]).reshape(-1).astype(np.int64)
            seg = seg[(seg >= 0) & (seg < n)]
            out[1:] += np.cumsum(np.bincount(seg, minlength=n)[:n])
    return out
