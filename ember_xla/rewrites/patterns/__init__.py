"""Cluster patterns, one idiom family per module, registered by root opcode."""

from ember_xla.rewrites.patterns.dot_bag import DotBag
from ember_xla.rewrites.patterns.padded_bag import PaddedBag
from ember_xla.rewrites.patterns.scatter_fold import ScatterFold
from ember_xla.rewrites.patterns.scatter_grad import ScatterGrad
from ember_xla.rewrites.patterns.segment_reduce import SegmentReduce

#: ScatterFold first: a zero scatter-add XLA:CPU folds into its add is an ordered scatter onto
#: the added value, never a sum from +0.
ALL_PATTERNS = [ScatterFold(), ScatterGrad(), SegmentReduce(), PaddedBag(), DotBag()]
#: For the DAE machines: padded bags in the programs' own order (one row after the other); no
#: ScatterFold (such scatters stay in XLA there, with the reason).
DAE_PATTERNS = [ScatterGrad(), SegmentReduce(), PaddedBag(xla_order=False), DotBag(xla_order=False)]

__all__ = ["ALL_PATTERNS", "DAE_PATTERNS", "DotBag", "PaddedBag", "ScatterFold", "ScatterGrad",
           "SegmentReduce"]
