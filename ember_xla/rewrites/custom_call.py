"""Build the ``ember.<kind>`` typed-FFI custom-call attributes: the kernel attributes travel in
``backend_config`` as an MLIR dictionary (``ember_xla.custom_calls`` holds the codec; see
docs/CUSTOM_CALL.md)."""

from __future__ import annotations

from typing import Any

from ember_xla.custom_calls import (
    ATTRS_KEY,
    KERNEL_ATTRS,
    encode_backend_config,
    mlir_f64,
    target_of_kind,
)

__all__ = ["KERNEL_ATTRS", "backend_config", "custom_call_attributes", "mlir_f64"]


def backend_config(attrs: dict[str, Any]) -> bytes:
    return encode_backend_config(attrs)


def custom_call_attributes(kind: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """The instruction attributes of an ``ember.<kind>`` custom-call: the kernel attributes
    stay structured under ``ATTRS_KEY`` and become ``backend_config`` on export."""
    target = target_of_kind(kind)
    missing = [k for k in target.attributes if k not in attrs]
    if missing:
        raise ValueError(f"custom-call attributes missing: {missing}")
    return {
        "custom_call_target": target.name,
        "custom_call_api_version": "API_VERSION_TYPED_FFI",
        ATTRS_KEY: {k: attrs[k] for k in target.attributes},
    }
