"""Dialects: a named bundle of per-op verifiers plus the module printer and parser hooks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation


class VerifyError(ValueError):
    """The IR breaks a rule of its dialect."""


@dataclasses.dataclass
class Dialect:
    name: str
    op_verifiers: dict[str, Callable[[Operation], None]] = dataclasses.field(default_factory=dict)
    print_module: Callable[[Module], str] | None = None
    parse_module: Callable[[str, str], Module] | None = None
    verify_module: Callable[[Module], None] | None = None


_DIALECTS: dict[str, Dialect] = {}


def register_dialect(d: Dialect) -> Dialect:
    _DIALECTS[d.name] = d
    return d


def get_dialect(name: str) -> Dialect:
    if name not in _DIALECTS:
        raise KeyError(f"no dialect named {name!r} (have: {', '.join(sorted(_DIALECTS))})")
    return _DIALECTS[name]
