"""Dialects: a named bundle of op classes, type classes, per-op verifiers and the module
printer/parser hooks, registered by name and loaded lazily (a dialect's module is imported the
first time one of its ops or types is asked for)."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

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
    #: opcode -> typed op class (``ir.opdef.OpDef`` subclasses).
    ops: dict[str, type[Operation]] = dataclasses.field(default_factory=dict)
    #: type name (``"slc.stream"``) -> ``ir.types.DialectType`` subclass.
    types: dict[str, type[Any]] = dataclasses.field(default_factory=dict)

    def add_op(self, cls: type[Operation]) -> type[Operation]:
        """Class decorator: register a typed op class under its ``opcode``."""
        if not cls.opcode.startswith(self.name + "."):
            raise ValueError(f"op {cls.opcode} does not belong to dialect {self.name}")
        self.ops[cls.opcode] = cls
        return cls

    def add_type(self, cls: type[Any]) -> type[Any]:
        self.types[cls.type_name] = cls
        return cls


_DIALECTS: dict[str, Dialect] = {}
#: dialect name -> module that registers it on import (lazy loading).
_LAZY: dict[str, str] = {}


def register_dialect(d: Dialect) -> Dialect:
    _DIALECTS[d.name] = d
    return d


def register_lazy_dialect(name: str, module: str) -> None:
    """Say which module defines dialect ``name``; it is imported when first needed."""
    _LAZY.setdefault(name, module)


def get_dialect(name: str) -> Dialect:
    if name not in _DIALECTS and name in _LAZY:
        importlib.import_module(_LAZY[name])
    if name not in _DIALECTS:
        known = ", ".join(sorted(set(_DIALECTS) | set(_LAZY)))
        raise KeyError(f"no dialect named {name!r} (have: {known})")
    return _DIALECTS[name]


def known_dialect(name: str) -> bool:
    return name in _DIALECTS or name in _LAZY


def op_class(opcode: str) -> type[Operation] | None:
    """The typed class registered for ``opcode`` (``None``: not a registered op)."""
    prefix = opcode.partition(".")[0]
    if not known_dialect(prefix):
        return None
    return get_dialect(prefix).ops.get(opcode)


def type_class(name: str) -> type[Any] | None:
    prefix = name.partition(".")[0]
    if not known_dialect(prefix):
        return None
    return get_dialect(prefix).types.get(name)
