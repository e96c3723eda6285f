"""Attribute values of the Ember levels that are not plain Python values."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SymbolRef:
    """A reference to a graph (function) of the module by name: ``@name``."""

    name: str

    def __str__(self) -> str:
        return f"@{self.name}"
