"""Types as values for the Ember levels: builtin scalars (``index``, ``i32``, ``f32`` ...),
``vector<8xf32>``, ``memref<?x64xf32>``, and parametric dialect types (``!slc.stream<index>``,
``!dlc.tu``). Every type prints as its text form; ``ir.text`` parses it back."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np


class Type:
    """Base of all types of the Ember levels (HLO keeps its own ``Shape``)."""


@dataclasses.dataclass(frozen=True)
class IndexType(Type):
    def __str__(self) -> str:
        return "index"


@dataclasses.dataclass(frozen=True)
class IntegerType(Type):
    width: int

    def __str__(self) -> str:
        return f"i{self.width}"


@dataclasses.dataclass(frozen=True)
class FloatType(Type):
    kind: str  # "f16" | "bf16" | "f32" | "f64"

    KINDS: ClassVar[tuple[str, ...]] = ("f16", "bf16", "f32", "f64")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise ValueError(f"unknown float type {self.kind!r}")

    @property
    def width(self) -> int:
        return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[self.kind]

    def __str__(self) -> str:
        return self.kind


def _dims(shape: tuple[int | None, ...]) -> str:
    return "".join(("?" if d is None else str(d)) + "x" for d in shape)


@dataclasses.dataclass(frozen=True)
class VectorType(Type):
    shape: tuple[int, ...]
    elem: Type

    def __str__(self) -> str:
        return f"vector<{_dims(self.shape)}{self.elem}>"

    @property
    def length(self) -> int:
        return int(np.prod(self.shape))


@dataclasses.dataclass(frozen=True)
class MemRefType(Type):
    """A buffer; ``None`` dims are dynamic (``?``)."""

    shape: tuple[int | None, ...]
    elem: Type

    def __str__(self) -> str:
        return f"memref<{_dims(self.shape)}{self.elem}>"

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclasses.dataclass(frozen=True)
class DialectType(Type):
    """``!dialect.name<param, ...>``; params are types, ints or identifiers (str). Dialects
    subclass it (with ``type_name``) to give the params names; unknown ones stay generic."""

    name: str
    params: tuple[Any, ...] = ()

    type_name: ClassVar[str] = ""

    def __str__(self) -> str:
        if not self.params:
            return f"!{self.name}"
        return f"!{self.name}<{', '.join(str(p) for p in self.params)}>"


INDEX = IndexType()
I1 = IntegerType(1)
I32 = IntegerType(32)
I64 = IntegerType(64)
F16, BF16, F32, F64 = (FloatType(k) for k in FloatType.KINDS)


def numpy_dtype(t: Type) -> np.dtype:
    """The numpy dtype holding one element of scalar type ``t`` (index -> int64)."""
    import ml_dtypes

    if isinstance(t, IndexType):
        return np.dtype(np.int64)
    if isinstance(t, IntegerType):
        return np.dtype(bool) if t.width == 1 else np.dtype(f"int{t.width}")
    if isinstance(t, FloatType):
        return np.dtype(ml_dtypes.bfloat16) if t.kind == "bf16" else np.dtype(
            {"f16": np.float16, "f32": np.float32, "f64": np.float64}[t.kind])
    raise TypeError(f"{t} has no numpy element type")


def element_type(t: Type) -> Type:
    """The scalar element type of a vector or memref (the type itself for scalars)."""
    return t.elem if isinstance(t, VectorType | MemRefType) else t
