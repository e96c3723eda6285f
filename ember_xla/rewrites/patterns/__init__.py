"""Cluster patterns, one idiom family per module, registered by root opcode."""

from ember_xla.rewrites.matcher import Pattern
from ember_xla.rewrites.patterns.dot_bag import DotBag
from ember_xla.rewrites.patterns.padded_bag import PaddedBag
from ember_xla.rewrites.patterns.scatter_fold import ScatterFold
from ember_xla.rewrites.patterns.scatter_grad import ScatterGrad
from ember_xla.rewrites.patterns.segment_reduce import SegmentReduce
from ember_xla.rewrites.patterns.segment_sum_rows import SegmentSumOfRows


def patterns(xla_order: bool) -> list[Pattern]:
    """Every pattern in matching order. ScatterFold first: a zero scatter-add XLA:CPU folds
    into its add is an ordered scatter onto the added value, never a sum from +0.
    SegmentSumOfRows last: a scatter-add of rows the lookup patterns before it did not take.
    ``xla_order``: padded bags in XLA:CPU's order (the CPU kernels) or in the programs' own,
    one row after the other (the DAE machines)."""
    return [ScatterFold(), ScatterGrad(), SegmentReduce(), PaddedBag(xla_order=xla_order),
            DotBag(xla_order=xla_order), SegmentSumOfRows()]


ALL_PATTERNS = patterns(xla_order=True)
DAE_PATTERNS = patterns(xla_order=False)

__all__ = ["ALL_PATTERNS", "DAE_PATTERNS", "DotBag", "PaddedBag", "ScatterFold", "ScatterGrad",
           "SegmentReduce", "SegmentSumOfRows"]
