"""Op traits: properties an op class declares and the generic verifier checks."""

from __future__ import annotations

from typing import ClassVar


class OpTrait:
    """Base of all traits (used as classes, never instantiated)."""


class IsTerminator(OpTrait):
    """The op ends its block (a yield, a return)."""


class NoTerminator(OpTrait):
    """The op's regions have no terminator (e.g. an access-engine configuration)."""


class SingleBlock(OpTrait):
    """Every region of the op has exactly one block."""


class IsolatedFromAbove(OpTrait):
    """Ops in the op's regions may not read values defined outside it (a function)."""


class Pure(OpTrait):
    """No side effects: an unused op can be erased."""


class HasParent(OpTrait):
    """The op must sit directly inside one of ``parents`` (opcodes). Subclass per use:
    ``class InFor(HasParent): parents = ("slc.for",)``."""

    parents: ClassVar[tuple[str, ...]] = ()


def has_parent(*opcodes: str) -> type[HasParent]:
    """A ``HasParent`` trait class for the given parent opcodes."""
    return type(f"HasParent[{','.join(opcodes)}]", (HasParent,), {"parents": tuple(opcodes)})
