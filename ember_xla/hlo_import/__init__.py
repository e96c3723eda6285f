"""Read HLO (HloModuleProto bytes, HLO text, JAX functions, tf.functions, SavedModels) into
``ir.Module`` and write it back. Heavy frameworks are imported lazily, per source."""

from ember_xla.hlo.errors import HloImportError

__all__ = ["HloImportError"]
