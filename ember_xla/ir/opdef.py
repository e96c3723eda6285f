"""Typed op definitions: one small class per op of the Ember dialects.

An op class sets ``opcode`` and ``traits``, adds named accessors for its operands, results,
regions and attributes (``operand``, ``operands`` and ``attribute`` declare the plain ones), a
``build`` classmethod for convenient construction and ``verify_`` for its own rules. The
generic parser makes instances through ``create`` so every op class parses from the generic
text form without code of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ember_xla.ir.block import Region
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


class OpDef(Operation):
    """Base of typed op classes. Subclasses set ``opcode`` (``"slc.for"``)."""

    opcode: ClassVar[str] = ""  # type: ignore[misc]

    @classmethod
    def create(
        cls,
        operands: Sequence[Value] = (),
        result_types: Sequence[Any] = (),
        attributes: dict[str, Any] | None = None,
        regions: Sequence[Region] = (),
        name: str = "",
    ) -> OpDef:
        op = cls.__new__(cls)
        Operation.__init__(op, cls.opcode, list(operands), list(result_types), attributes,
                           None, name, list(regions))
        return op

    # -- helpers for verify_ ---------------------------------------------------------------
    def fail(self, msg: str) -> VerifyError:
        """A ``VerifyError`` naming this op (raise it)."""
        return VerifyError(f"{self.opcode}{' %' + self.name if self.name else ''}: {msg}")

    def expect_counts(self, operands: int | None = None, results: int | None = None,
                      regions: int | None = None) -> None:
        for what, want, have in (("operands", operands, len(self.operands)),
                                 ("results", results, len(self.results)),
                                 ("regions", regions, len(self.regions))):
            if want is not None and want != have:
                raise self.fail(f"expects {want} {what}, has {have}")

    def attr(self, key: str, kinds: type | tuple[type, ...] | None = None) -> Any:
        """Attribute ``key``; a ``VerifyError`` if missing or not of ``kinds``."""
        if key not in self.attributes:
            raise self.fail(f"missing attribute {key!r}")
        v = self.attributes[key]
        if kinds is not None and not isinstance(v, kinds):
            raise self.fail(f"attribute {key!r} has the wrong kind: {v!r}")
        return v


class operand:  # noqa: N801  (used like a field declaration: ``memref = operand(0)``)
    """A named accessor of the op's operand ``at``: ``memref = operand(0)``."""

    def __init__(self, at: int) -> None:
        self.at: int | slice = at

    def __get__(self, op: Operation | None, owner: type | None = None) -> Any:
        return self if op is None else op.operands[self.at]


class operands(operand):  # noqa: N801
    """A named accessor of a run of operands: ``indices = operands(1)`` (from 1 to the end),
    ``operands(1, -2)`` (from 1 to before the last two)."""

    def __init__(self, start: int, stop: int | None = None) -> None:
        self.at = slice(start, stop)


class attribute:  # noqa: N801
    """A named accessor of attribute ``key``: ``dim = attribute("dim")``."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __get__(self, op: Operation | None, owner: type | None = None) -> Any:
        return self if op is None else op.attributes[self.key]
