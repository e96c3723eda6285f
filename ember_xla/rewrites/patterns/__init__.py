"""Cluster patterns, one idiom family per module, registered by root opcode."""

from ember_xla.rewrites.patterns.dot_bag import DotBag
from ember_xla.rewrites.patterns.padded_bag import PaddedBag
from ember_xla.rewrites.patterns.scatter_fold import ScatterFold
from ember_xla.rewrites.patterns.scatter_grad import ScatterGrad
from ember_xla.rewrites.patterns.segment_reduce import SegmentReduce
from ember_xla.rewrites.patterns.segment_sum_rows import SegmentSumOfRows

#: ScatterFold first: a zero scatter-add XLA:CPU folds into its add is an ordered scatter onto
#: the added value, never a sum from +0. SegmentSumOfRows last: a scatter-add of rows the lookup
#: patterns before it did not take.
ALL_PATTERNS = [ScatterFold(), ScatterGrad(), SegmentReduce(), PaddedBag(), DotBag(),
                SegmentSumOfRows()]
#: For the DAE machines: the same families, padded bags in the programs' own order (one row
#: after the other). A folded scatter and a segment sum of computed rows lower as the ordered
#: scatter and the gradient scatter-add do (each update added in index order).
DAE_PATTERNS = [ScatterFold(), ScatterGrad(), SegmentReduce(), PaddedBag(xla_order=False),
                DotBag(xla_order=False), SegmentSumOfRows()]

__all__ = ["ALL_PATTERNS", "DAE_PATTERNS", "DotBag", "PaddedBag", "ScatterFold", "ScatterGrad",
           "SegmentReduce", "SegmentSumOfRows"]
