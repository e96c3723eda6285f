"""ClusterSpecs built by hand (no JAX): the sum embedding bag of Ember's tests and small
variants, for golden-text, round-trip and counter tests of the SLC lowering."""

from __future__ import annotations

from ember_xla.dae_target.lower.cluster import ArraySpec, ClusterSpec, Part


def offsets_bag(n: int = 10, d: int = 4, lookups: int = 6, bags: int = 2,
                combiner: str = "sum", mode: str = "clip", wrap: bool = False,
                weighted: bool = False, dtype: str = "f32", init: float = 0.0,
                index_bits: int = 64, ids: str = "s32") -> ClusterSpec:
    table = ArraySpec((n, d), dtype)
    idx = ArraySpec((lookups,), ids)
    off = ArraySpec((bags + 1,), "s32")
    w = ArraySpec((lookups,), dtype) if weighted else None
    out = ArraySpec((bags, d), dtype)
    operands = (table, idx, off) + ((w,) if w else ())
    roles = ("table", "indices", "offsets") + (("weights",) if w else ())
    return ClusterSpec("offsets_bag", "bag", operands, roles, (out,), combiner, mode, wrap,
                       weighted, init, index_bits, (Part(table, idx, off, w, out, 0),))


def segment_reduce(n: int = 10, d: int = 4, lookups: int = 6, segments: int = 3,
                   combiner: str = "sum", mode: str = "fill") -> ClusterSpec:
    table = ArraySpec((n, d), "f32")
    idx = ArraySpec((lookups,), "s64")
    seg = ArraySpec((lookups,), "s32")
    out = ArraySpec((segments, d), "f32")
    return ClusterSpec("segment_reduce", "seg", (table, idx, seg),
                       ("table", "indices", "segment_ids"), (out,), combiner, mode, True,
                       False, 0.0, 32, (Part(table, idx, seg, None, out, 0),))
