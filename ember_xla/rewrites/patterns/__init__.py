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
#: For the DAE machines: padded bags in the programs' own order (one row after the other); no
#: ScatterFold (such scatters stay in XLA there, with the reason), no segment sums of computed
#: rows (their DAE lowering and placement are written for a lookup's gradient).
DAE_PATTERNS = [ScatterGrad(), SegmentReduce(), PaddedBag(xla_order=False), DotBag(xla_order=False)]

__all__ = ["ALL_PATTERNS", "DAE_PATTERNS", "DotBag", "PaddedBag", "ScatterFold", "ScatterGrad",
           "SegmentReduce", "SegmentSumOfRows"]
