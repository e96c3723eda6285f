"""ember-xla: find the embedding operations of JAX/TF models in their HLO, outline them, and run
them as fast custom-calls (and, later, on decoupled access-execute hardware).

The public API is small and re-exports only; see docs/ARCHITECTURE.md for the layers.
"""

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo.parser import parse_module
from ember_xla.hlo.printer import print_module
from ember_xla.hlo_import.load import load_model, load_models
from ember_xla.hlo_import.model import Model
from ember_xla.hlo_import.proto import module_from_proto, module_to_proto
from ember_xla.ops import embedding_bag
from ember_xla.orchestrate.jit import jit
from ember_xla.orchestrate.keras_fit import compile_keras
from ember_xla.orchestrate.nnx_jit import nnx_jit
from ember_xla.rewrites.pipeline import RewriteResult, rewrite_module

__version__ = "0.1.0"

__all__ = [
    "HloImportError", "Model", "RewriteResult", "compile_keras", "embedding_bag", "jit",
    "load_model", "load_models", "module_from_proto", "module_to_proto", "nnx_jit",
    "parse_module", "print_module", "rewrite_module",
]
