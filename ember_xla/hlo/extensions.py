"""Extension attributes of HLO instructions: structured attributes that live on the op in memory
(e.g. an ember custom-call's kernel attributes under ``"ember"``) and are encoded into proto
fields (``backend_config``) only when the module is exported to proto or text. Owners register
an encoder for their key; exporters call ``encode_extensions`` on each op's attributes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: key -> function(attributes) returning the attributes with that key encoded away.
_ENCODERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def register_attribute_encoder(key: str,
                               encode: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    _ENCODERS[key] = encode


def encode_extensions(attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` as the proto sees them (the same dict when it has no extension keys)."""
    for key, encode in _ENCODERS.items():
        if key in attrs:
            attrs = encode(attrs)
    return attrs


def extension_keys() -> frozenset[str]:
    return frozenset(_ENCODERS)
