"""Read the XLA flags this process's XLA:CPU compiles with: ``XLA_FLAGS`` in the environment,
read when asked (a rewrite models the XLA:CPU that will run it here, ``--verify`` included)."""

from __future__ import annotations

import os


def xla_flag_values(name: str) -> list[str]:
    """The values of every ``--name[=value]`` in ``XLA_FLAGS``, in order: the text after ``=``
    ("" for ``--name=``), "true" for a bare ``--name`` (as XLA reads a boolean flag)."""
    values = []
    for flag in os.environ.get("XLA_FLAGS", "").split():
        key, eq, v = flag.partition("=")
        if key == f"--{name}":
            values.append(v if eq else "true")
    return values


def xla_flag(name: str) -> str | None:
    """The value of the last ``--name[=value]`` in ``XLA_FLAGS`` (``xla_flag_values``), None
    when the flag is not set."""
    values = xla_flag_values(name)
    return values[-1] if values else None
