"""Cluster patterns, one idiom family per module, registered by root opcode."""

from ember_xla.rewrites.patterns.padded_bag import PaddedBag
from ember_xla.rewrites.patterns.scatter_grad import ScatterGrad
from ember_xla.rewrites.patterns.segment_reduce import SegmentReduce

ALL_PATTERNS = [ScatterGrad(), SegmentReduce(), PaddedBag()]

__all__ = ["ALL_PATTERNS", "PaddedBag", "ScatterGrad", "SegmentReduce"]
