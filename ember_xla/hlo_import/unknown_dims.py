"""The sizes given to a SavedModel signature's unknown (None) dimensions: one size for every
unknown dimension, and sizes for single dimensions by input name and axis (a graph's node
count and edge count differ). Written ``N`` or ``N,INPUT:AXIS=SIZE,...`` (``--unknown_dim``);
an entry that names no unknown dimension of any imported signature is an error."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

MAX_SIZE = 2**31 - 1
DEFAULT_SIZE = 8
_ENTRY = re.compile(r"^(?P<name>[^:=]+):(?P<axis>\d+)=(?P<size>\d+)$")


class UnknownDimsError(ValueError):
    """A malformed ``--unknown_dim`` value, or an entry that names no unknown dimension."""


def _size(text: str, what: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_SIZE:
        raise UnknownDimsError(f"{what}: expected an integer in [1, {MAX_SIZE}], got {text!r}")
    return int(text)


@dataclasses.dataclass(frozen=True)
class UnknownDims:
    default: int = DEFAULT_SIZE
    sizes: tuple[tuple[str, int, int], ...] = ()  # (input name, axis, size)

    @classmethod
    def parse(cls, value: int | str | UnknownDims) -> UnknownDims:
        """From an int, a ``--unknown_dim`` text or an UnknownDims."""
        if isinstance(value, UnknownDims):
            return value
        if isinstance(value, int):
            return cls(_size(str(value), "--unknown_dim"))
        default, sizes, seen = DEFAULT_SIZE, [], set()
        for item in (s.strip() for s in str(value).split(",")):
            m = _ENTRY.match(item)
            if m is None and item.isdigit():
                default = _size(item, "--unknown_dim")
                continue
            if m is None:
                raise UnknownDimsError(f"--unknown_dim: {item!r} is neither a size N nor "
                                       "INPUT:AXIS=SIZE (e.g. --unknown_dim=256,edges:0=5000)")
            key = (m["name"].strip(), int(m["axis"]))
            if key in seen:
                raise UnknownDimsError(f"--unknown_dim: {key[0]}:{key[1]} is given twice")
            seen.add(key)
            sizes.append((*key, _size(m["size"], f"--unknown_dim {item}")))
        return cls(default, tuple(sizes))

    def size(self, name: str, axis: int) -> int:
        for n, a, s in self.sizes:
            if (n, a) == (name, axis):
                return s
        return self.default

    def per_input(self) -> bool:
        return bool(self.sizes)

    def to_json(self) -> int | str:
        """The default alone as an int, else the flag's text."""
        return self.default if not self.sizes else str(self)

    def __str__(self) -> str:
        return ",".join([str(self.default), *(f"{n}:{a}={s}" for n, a, s in self.sizes)])

    def unused(self, specs: dict[str, Any]) -> list[str]:
        """Entries naming no unknown dimension among ``specs`` (name -> TensorSpec)."""
        out = []
        for name, axis, size in self.sizes:
            spec = specs.get(name)
            dims = spec.shape.as_list() if spec is not None and spec.shape.rank is not None \
                else None
            if dims is None or axis >= len(dims) or dims[axis] is not None:
                out.append(f"{name}:{axis}={size}")
        return out
