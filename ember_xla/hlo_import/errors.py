"""Re-export: the importers' error type lives in ``ember_xla.ir.hlo.errors`` (the HLO text
parser in ``ir/hlo`` raises it too); callers keep using this name."""

from ember_xla.ir.hlo.errors import ImportError_

__all__ = ["ImportError_"]
