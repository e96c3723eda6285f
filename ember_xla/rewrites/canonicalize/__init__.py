"""Canonicalize, then match: passes that bring equivalent HLO spellings of an embedding
lookup + reduction to the one form the cluster patterns match (docs/IDIOMS.md,
"Canonicalization"). Each pass is a registered ``ModulePass`` in its own module; ``canonicalize``
runs the default pipeline and returns what the passes saw but refused to rewrite."""

from __future__ import annotations

from ember_xla.ir.graph import Module
from ember_xla.ir.passes import PassPipeline
from ember_xla.rewrites.canonicalize import (  # noqa: F401  (registers the passes)
    batch_dot,
    batched_bags,
    count_lookup,
    fold_noops,
    fold_tuple_index,
    inline_calls,
    lookup_layout,
    mask_segments,
    onehot_dot,
    scale_weights,
    sliced_table,
    split_lookup,
    squeeze_gather,
    squeeze_scatter,
    stacked_tables,
    transposed_table,
    unit_dim_bags,
)
from ember_xla.rewrites.canonicalize.base import PatternPass, one_canonicalization
from ember_xla.rewrites.canonicalize.notes import CanonNote, collecting


def default_pipeline(assume_finite_tables: bool = False, xla_order: bool = True) -> str:
    return ",".join([
        "inline-calls",
        "fold-tuple-index",
        "fold-noops",
        "count-as-lookup",
        "squeeze-gather",
        "squeeze-scatter",
        "transposed-table",
        "sliced-table",
        "stacked-tables",
        f"lookup-layout{{xla_order={xla_order}}}",
        "unit-dim-bags",
        f"batched-bags{{xla_order={xla_order}}}",
        "batch-dot-to-multiply",
        f"onehot-dot-to-gather{{assume_finite_tables={assume_finite_tables}}}",
        "split-shared-lookup",
        "scale-to-weights",
        f"masked-bag-to-segments{{xla_order={xla_order}}}",
    ])


def canonicalize(module: Module, pipeline: str | None = None,
                 assume_finite_tables: bool = False, xla_order: bool = True
                 ) -> list[CanonNote]:
    """Run ``pipeline`` (default: ``default_pipeline``) on ``module`` in place; return the
    refusals the passes recorded. ``xla_order``: the rewrite must add rows in XLA:CPU's order
    (the CPU kernels; False for the DAE machines)."""
    spec = pipeline or default_pipeline(assume_finite_tables, xla_order)
    pipe = PassPipeline.from_spec(spec)
    shared = all(isinstance(p, PatternPass) for p in pipe.passes)  # each says when it edits
    with collecting() as notes, one_canonicalization(shared):
        pipe.apply(module)
    return list(notes)


__all__ = ["CanonNote", "canonicalize", "default_pipeline"]
