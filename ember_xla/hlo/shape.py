"""HLO shapes: element type, dimensions, layout and tuples; text form and numpy dtypes."""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np

# Text name -> proto enum name.
ELEMENT_TYPES: dict[str, str] = {
    "pred": "PRED", "s2": "S2", "s4": "S4", "s8": "S8", "s16": "S16", "s32": "S32", "s64": "S64",
    "u2": "U2", "u4": "U4", "u8": "U8", "u16": "U16", "u32": "U32", "u64": "U64",
    "f16": "F16", "bf16": "BF16", "f32": "F32", "f64": "F64", "c64": "C64", "c128": "C128",
    "f8e5m2": "F8E5M2", "f8e4m3fn": "F8E4M3FN", "f8e4m3b11fnuz": "F8E4M3B11FNUZ",
    "f8e5m2fnuz": "F8E5M2FNUZ", "f8e4m3fnuz": "F8E4M3FNUZ", "f8e4m3": "F8E4M3",
    "f8e3m4": "F8E3M4", "f4e2m1fn": "F4E2M1FN", "f8e8m0fnu": "F8E8M0FNU",
    "token": "TOKEN", "opaque": "OPAQUE_TYPE",
}
PROTO_TO_TEXT = {v: k for k, v in ELEMENT_TYPES.items()}

_NUMPY: dict[str, Any] = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
    "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
    "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4,
}

# Layout fields whose value is the default that HLO text leaves unsaid.
_TEXTLESS_LAYOUT = {("tail_padding_alignment_in_elements", 1)}

FLOAT_TYPES = {"f16", "bf16", "f32", "f64"}
INT_TYPES = {"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"}


def numpy_dtype(element_type: str) -> np.dtype:
    if element_type not in _NUMPY:
        raise ValueError(f"element type {element_type} has no numpy equivalent")
    return np.dtype(_NUMPY[element_type])


def element_type_of(dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    for name, t in _NUMPY.items():
        if np.dtype(t) == dtype:
            return name
    raise ValueError(f"numpy dtype {dtype} has no HLO element type")


@dataclasses.dataclass(frozen=True)
class Shape:
    """An array shape (``element_type`` + ``dims``), a tuple of shapes, a token or opaque.

    ``layout`` is the minor-to-major order, or None when the shape carries no layout.
    ``dynamic`` marks bounded-dynamic dimensions. ``layout_extra`` keeps layout fields we do not
    interpret (tiles, memory space ...) in proto-dict form so round trips stay lossless.
    """

    element_type: str
    dims: tuple[int, ...] = ()
    layout: tuple[int, ...] | None = None
    tuple_shapes: tuple[Shape, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout_extra: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def array(element_type: str, dims: tuple[int, ...] | list[int], layout: Any = "default"):
        dims = tuple(int(d) for d in dims)
        if layout == "default":
            layout = tuple(range(len(dims) - 1, -1, -1))
        return Shape(element_type, dims, None if layout is None else tuple(layout))

    @staticmethod
    def tuple_of(shapes: list[Shape] | tuple[Shape, ...]) -> Shape:
        return Shape("tuple", tuple_shapes=tuple(shapes))

    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_array(self) -> bool:
        return self.element_type not in ("tuple", "token", "opaque")

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def size(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.element_type)

    def with_dims(self, dims: tuple[int, ...], default_layout: bool = True) -> Shape:
        layout = tuple(range(len(dims) - 1, -1, -1)) if self.layout is not None else None
        return Shape(self.element_type, tuple(dims), layout if default_layout else None)

    def laid_out(self) -> Shape:
        """This shape with the default (row-major) layout where it has none, as XLA's parser
        gives a shape written without one (``f32[]``); tuples element by element."""
        if self.is_tuple:
            return Shape.tuple_of(tuple(t.laid_out() for t in self.tuple_shapes))
        if self.layout is None and self.is_array:
            return Shape(self.element_type, self.dims, tuple(range(self.rank - 1, -1, -1)), (),
                         self.dynamic)
        return self

    def with_type(self, element_type: str) -> Shape:
        return dataclasses.replace(self, element_type=element_type)

    def has_default_layout(self) -> bool:
        if self.is_tuple:
            return all(s.has_default_layout() for s in self.tuple_shapes)
        extra = [kv for kv in self.layout_extra
                 if kv not in _TEXTLESS_LAYOUT and kv[0] != "__unknown_fields__"]
        return self.layout is None or (
            self.layout == tuple(range(self.rank - 1, -1, -1)) and not extra
        )

    def to_text(self, with_layout: bool = True) -> str:
        # Shapes are immutable: remember the text (in the instance dict, outside the fields, so
        # equality, hashing and repr are unchanged).
        key = "_text" if with_layout else "_text_nolayout"
        text = self.__dict__.get(key)
        if text is None:
            text = self._to_text(with_layout)
            object.__setattr__(self, key, text)
        return text

    def _to_text(self, with_layout: bool) -> str:
        if self.is_tuple:
            return "(" + ", ".join(s.to_text(with_layout) for s in self.tuple_shapes) + ")"
        dims = []
        for i, d in enumerate(self.dims):
            dyn = self.dynamic[i] if i < len(self.dynamic) else False
            dims.append(f"<={d}" if dyn else str(d))
        text = f"{self.element_type}[{','.join(dims)}]"
        if with_layout and self.layout is not None and self.is_array:
            extra = {k: v for k, v in self.layout_extra  # values may be lists: no hashing
                     if not any(k == a and v == b for a, b in _TEXTLESS_LAYOUT)
                     and k != "__unknown_fields__"}
            if extra:
                raise ValueError(f"cannot print layout fields {extra} as HLO text")
            if self.dims or self.layout:
                text += "{" + ",".join(str(d) for d in self.layout) + "}"
        return text

    def __str__(self) -> str:
        return self.to_text()


def shape_from_dict(d: dict[str, Any]) -> Shape:
    """A ``Shape`` from the proto-dict form of an XLA ``ShapeProto``."""
    et = d.get("element_type", "PRIMITIVE_TYPE_INVALID")
    if et == "TUPLE":
        return Shape.tuple_of(tuple(shape_from_dict(s) for s in d.get("tuple_shapes", [])))
    if et not in PROTO_TO_TEXT:
        raise ValueError(f"unsupported element type {et}")
    dims = tuple(int(x) for x in d.get("dimensions", []))
    layout = None
    extra: tuple[tuple[str, Any], ...] = ()
    if "layout" in d:
        lay = dict(d["layout"])
        layout = tuple(int(x) for x in lay.pop("minor_to_major", []))
        extra = tuple(sorted(lay.items()))
    dyn = tuple(bool(x) for x in d.get("is_dynamic_dimension", []))
    if not any(dyn):
        dyn = ()
    return Shape(PROTO_TO_TEXT[et], dims, layout, (), dyn, extra)


def shape_to_dict(s: Shape) -> dict[str, Any]:
    if s.is_tuple:
        return {"element_type": "TUPLE", "tuple_shapes": [shape_to_dict(t) for t in s.tuple_shapes]}
    d: dict[str, Any] = {"element_type": ELEMENT_TYPES[s.element_type]}
    if s.dims:
        d["dimensions"] = list(s.dims)
    if s.layout is not None:
        lay: dict[str, Any] = dict(s.layout_extra)
        if s.layout:
            lay["minor_to_major"] = list(s.layout)
        d["layout"] = lay
    if s.dims and s.is_array:
        d["is_dynamic_dimension"] = [
            s.dynamic[i] if i < len(s.dynamic) else False for i in range(len(s.dims))
        ]
    return d
