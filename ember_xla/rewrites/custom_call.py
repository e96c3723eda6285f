"""Build the ``ember.<kind>`` typed-FFI custom-call: attributes in ``backend_config`` as an MLIR
dictionary (the spelling XLA's typed FFI reads; see docs/CUSTOM_CALL.md)."""

from __future__ import annotations

import math
import struct
from typing import Any

# Attributes every kernel takes, in the order we print them (the handler looks names up).
KERNEL_ATTRS = ("combiner", "index_bits", "index_mode", "init", "weighted", "wrap_negative")


def mlir_f64(x: float) -> str:
    """An f64 literal MLIR parses: a decimal point or exponent always; inf/NaN as hex bits."""
    if math.isnan(x) or math.isinf(x):
        bits = struct.unpack("<Q", struct.pack("<d", float(x)))[0]
        return f"0x{bits:016X} : f64"
    text = repr(float(x))
    if "." not in text and "e" not in text and "E" not in text:
        text += ".0"
    return f"{text} : f64"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v} : i64"
    if isinstance(v, float):
        return mlir_f64(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"cannot encode attribute value {v!r}")


def backend_config(attrs: dict[str, Any]) -> bytes:
    missing = [k for k in KERNEL_ATTRS if k not in attrs]
    if missing:
        raise ValueError(f"custom-call attributes missing: {missing}")
    body = ", ".join(f"{k} = {_value(attrs[k])}" for k in KERNEL_ATTRS)
    return ("{" + body + "}").encode()


def custom_call_attributes(kind: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """The instruction attributes (proto-dict form) of an ``ember.<kind>`` custom-call."""
    return {
        "custom_call_target": f"ember.{kind}",
        "custom_call_api_version": "API_VERSION_TYPED_FFI",
        "backend_config": backend_config(attrs),
    }
