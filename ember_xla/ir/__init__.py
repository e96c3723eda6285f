"""Generic IR core (xDSL-style): values, operations with regions, blocks, graphs, modules, typed
op definitions, types, the generic text form, a verifier, rewriting, passes and an interpreter
framework.

The core knows nothing about HLO; dialects (``ember_xla.hlo`` first, the Ember levels in
``dae_target.dialects``) build on it.
"""

from ember_xla.ir.block import Block, Region
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import BlockArgument, OpResult, Value

__all__ = ["Block", "BlockArgument", "Graph", "Module", "OpResult", "Operation", "Region",
           "Value"]
