"""Shares of one cluster's batch: the operands of the output rows ``[start, stop)`` of a
single-table cluster, so that a share is the cluster's own program run on them and the shares'
outputs, stacked in row order, are the cluster's output bit for bit.

- ``padded_bag``: the rows of the ids (and weights) matrix.
- ``offsets_bag``: the offsets ``[start, stop]`` (they index the whole indices array).
- ``segment_reduce`` with non-decreasing segment ids: the lookups of segments
  ``[start, stop)``, their ids rebased to ``start`` (lookups outside ``[0, segments)`` are
  dropped by the reduction and belong to no share).
Every other cluster (several tables, several outputs, unsorted segment ids) runs whole; the
reason is ``whole_only``."""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.call_specs import ClusterSpec

SHAREABLE = ("padded_bag", "offsets_bag", "segment_reduce")


@dataclasses.dataclass(frozen=True)
class Share:
    operands: list[np.ndarray]
    output_shapes: list[tuple[int, ...]]
    lookups: np.ndarray            # the table rows this share looks up (flat ids)


def whole_only(spec: ClusterSpec, operands: list[np.ndarray]) -> str | None:
    """Why the cluster cannot be split by batch (None: it can)."""
    if spec.kind not in SHAREABLE:
        return f"{spec.kind} calls run whole"
    if len(spec.outputs) != 1:
        return "a call with several outputs runs whole"
    if spec.kind == "segment_reduce":
        seg = np.asarray(operands[2]).reshape(-1)
        if seg.size > 1 and np.any(seg[1:] < seg[:-1]):
            return "its segment ids are not sorted"
    return None


def rows(spec: ClusterSpec) -> int:
    """The output rows (bags or segments) a share is a range of."""
    return int(spec.outputs[0].shape[0])


def share(spec: ClusterSpec, operands: list[np.ndarray], start: int, stop: int) -> Share:
    """The operands of output rows ``[start, stop)``; the whole cluster for ``[0, rows)``."""
    n = rows(spec)
    if not 0 <= start <= stop <= n:
        raise ValueError(f"share [{start}, {stop}) is not within the {n} rows of %{spec.name}")
    dim = spec.outputs[0].shape[1:]
    if start == 0 and stop == n:
        return Share(list(operands), [tuple(o.shape) for o in spec.outputs],
                     _ids(spec, operands))
    why = whole_only(spec, operands)
    if why is not None:
        raise ValueError(f"%{spec.name} cannot be split by batch: {why}")
    ops = list(operands)
    w = 3 if spec.kind != "padded_bag" else 2
    weighted = len(ops) > w
    if spec.kind == "padded_bag":
        ops[1] = np.ascontiguousarray(ops[1][start:stop])
        if weighted:
            ops[2] = np.ascontiguousarray(ops[2][start:stop])
        ids = ops[1]
    elif spec.kind == "offsets_bag":
        off = np.asarray(ops[2])
        ops[2] = np.ascontiguousarray(off[start:stop + 1])
        ids = np.asarray(ops[1]).reshape(-1)[int(off[start]):int(off[stop])]
    else:
        seg = np.asarray(ops[2])
        flat = seg.reshape(-1)
        lo, hi = (int(x) for x in np.searchsorted(flat, [start, stop], side="left"))
        ops[1] = np.ascontiguousarray(np.asarray(ops[1])[lo:hi])
        ops[2] = np.ascontiguousarray((seg[lo:hi] - seg.dtype.type(start)).astype(seg.dtype))
        if weighted:
            ops[3] = np.ascontiguousarray(np.asarray(ops[3])[lo:hi])
        ids = ops[1]
    return Share(ops, [(stop - start, *dim)], np.asarray(ids).reshape(-1))


def _ids(spec: ClusterSpec, operands: list[np.ndarray]) -> np.ndarray:
    out = [np.asarray(operands[p.first_operand + 1]).reshape(-1) for p in spec.parts]
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def ids_prefix(spec: ClusterSpec, operands: list[np.ndarray]) -> np.ndarray:
    """``p[r]``: the lookups of output rows ``[0, r)`` (``rows + 1`` entries)."""
    n = rows(spec)
    if spec.kind == "padded_bag":
        per = int(np.asarray(operands[1]).size // max(n, 1))
        return np.arange(n + 1, dtype=np.int64) * per
    if spec.kind == "offsets_bag":
        off = np.asarray(operands[2]).astype(np.int64)
        return off - off[0]
    if spec.kind == "segment_reduce" and whole_only(spec, operands) is None:
        flat = np.asarray(operands[2]).reshape(-1)
        return np.searchsorted(flat, np.arange(n + 1), side="left").astype(np.int64) - \
            int(np.searchsorted(flat, 0, side="left"))
    total = len(_ids(spec, operands))
    return np.round(np.linspace(0, total, n + 1)).astype(np.int64)
