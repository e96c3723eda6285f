"""Re-export: the HLO text parser lives in ``ember_xla.ir.hlo.parser`` (the HLO dialect owns its
text syntax); importers and callers keep using this name."""

from ember_xla.ir.hlo.parser import parse_module, parse_module_located

__all__ = ["parse_module", "parse_module_located"]
