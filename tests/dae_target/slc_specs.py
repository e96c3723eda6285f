"""ClusterSpecs built by hand (no JAX): the sum embedding bag of Ember's tests and small
variants, for golden-text, round-trip and counter tests of the SLC lowering."""

from __future__ import annotations

from ember_xla.call_specs import ArraySpec, ClusterSpec, Part


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


def make_spec(kind: str, tables: list[tuple[int, int, str, str]], lookups: int, rows: int,
              combiner: str, mode: str, wrap: bool, index_bits: int, id_dtype: str,
              weights: str | None = None, bag_width: int = 1, init: float = 0.0
              ) -> ClusterSpec:
    """Any cluster: ``tables`` = [(N, D, table dtype, result dtype)] (k > 1: grouped);
    ``weights`` = None or the weights' dtype; padded bags are [rows, bag_width]."""
    operands: list[ArraySpec] = []
    roles: list[str] = []
    parts: list[Part] = []
    outs: list[ArraySpec] = []
    w = None
    for n, d, tdt, odt in tables:
        first = len(operands)
        table = ArraySpec((n, d), tdt)
        out = ArraySpec((rows, d), odt)
        if kind == "padded_bag":
            lk, layout = ArraySpec((rows, bag_width), id_dtype), None
            w = ArraySpec((rows, bag_width), weights) if weights else None
        else:
            lk = ArraySpec((lookups,), id_dtype)
            layout = ArraySpec((rows + 1,) if kind == "offsets_bag" else (lookups,), "s32")
            w = ArraySpec((lookups,), weights) if weights else None
        operands += [table, lk] + ([layout] if layout else [])
        roles += ["table", "ids" if kind == "padded_bag" else "indices"]
        roles += ["offsets" if kind == "offsets_bag" else "segment_ids"] if layout else []
        parts.append(Part(table, lk, layout, w, out, first))
        outs.append(out)
    if w is not None:
        operands.append(w)
        roles.append("weights")
    return ClusterSpec(kind, "random", tuple(operands), tuple(roles), tuple(outs), combiner,
                       mode, wrap, w is not None, init, index_bits, tuple(parts))
