"""Generic IR core (xDSL-style): values, operations, graphs, modules, rewriting and passes.

The core knows nothing about HLO; dialects (``ir.hlo`` first, the Ember levels later) build on it.
"""

from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value

__all__ = ["Graph", "Module", "Operation", "Value"]
