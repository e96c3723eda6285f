"""HLO literals: proto-dict form <-> numpy arrays <-> XLA's literal text syntax."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember_xla.hlo.shape import Shape, numpy_dtype, shape_from_dict, shape_to_dict

# element type -> (proto field, stored as bytes?)
_FIELD: dict[str, tuple[str, bool]] = {
    "pred": ("preds", False), "s8": ("s8s", True), "u8": ("u8s", True),
    "s16": ("s16s", True), "u16": ("u16s", True), "s32": ("s32s", False),
    "s64": ("s64s", False), "u32": ("u32s", False), "u64": ("u64s", False),
    "f32": ("f32s", False), "f64": ("f64s", False), "f16": ("f16s", True),
    "bf16": ("bf16s", True), "c64": ("c64s", False), "c128": ("c128s", False),
    "f8e5m2": ("f8e5m2s", True), "f8e4m3fn": ("f8e4m3fns", True),
    "s4": ("s4s", True), "u4": ("u4s", True),
}


def _physical_perm(s: Shape) -> tuple[int, ...] | None:
    """Axes order of the literal's storage (major to minor), or None for row-major."""
    if s.layout is None or s.layout == tuple(range(s.rank - 1, -1, -1)) or s.rank < 2:
        return None
    return tuple(reversed(s.layout))


def literal_to_numpy(d: dict[str, Any]) -> np.ndarray | list:
    """A numpy array (or a list of them for tuple literals) from a LiteralProto dict."""
    s = shape_from_dict(d.get("shape", {}))
    if s.is_tuple:
        return [literal_to_numpy(t) for t in d.get("tuple_literals", [])]
    field, as_bytes = _FIELD.get(s.element_type, (None, False))
    if field is None:
        raise ValueError(f"literal of element type {s.element_type} is not supported")
    dt = numpy_dtype(s.element_type)
    raw = d.get(field, b"" if as_bytes else [])
    if as_bytes:
        flat = np.frombuffer(bytes(raw), dtype=dt.newbyteorder("<")).astype(dt)
    elif s.element_type in ("c64", "c128"):
        pairs = np.asarray(raw, dtype=np.float64).reshape(-1, 2)
        flat = (pairs[:, 0] + 1j * pairs[:, 1]).astype(dt)
    else:
        flat = np.asarray(raw, dtype=dt)
    if flat.size != s.size:
        raise ValueError(f"literal has {flat.size} values for shape {s} ({s.size} expected)")
    perm = _physical_perm(s)
    if perm is None:
        return flat.reshape(s.dims)
    if sorted(perm) != list(range(len(s.dims))):
        raise ValueError(f"literal of shape {s}: its layout does not permute the "
                         f"{len(s.dims)} dims")
    phys = flat.reshape([s.dims[a] for a in perm])
    return np.transpose(phys, np.argsort(perm))


def literal_from_numpy(arr: np.ndarray, shape: Shape) -> dict[str, Any]:
    """A LiteralProto dict holding ``arr`` with ``shape`` (storage follows the layout)."""
    field, as_bytes = _FIELD[shape.element_type]
    a = np.asarray(arr, dtype=numpy_dtype(shape.element_type)).reshape(shape.dims)
    perm = _physical_perm(shape)
    if perm is not None:
        a = np.transpose(a, perm)
    flat = np.ascontiguousarray(a).reshape(-1)
    d: dict[str, Any] = {"shape": shape_to_dict(shape)}
    if as_bytes:
        value: Any = flat.astype(flat.dtype.newbyteorder("<")).tobytes()
    elif shape.element_type in ("c64", "c128"):
        value = [float(x) for c in flat for x in (c.real, c.imag)]
    elif shape.element_type == "pred":
        value = [bool(x) for x in flat]
    elif shape.element_type in ("f32", "f64"):
        value = [float(x) for x in flat]
    else:
        value = [int(x) for x in flat]
    if (as_bytes and value) or (not as_bytes and value):
        d[field] = value
    return d


def _fmt(x: Any, element_type: str) -> str:
    if element_type == "pred":
        return "true" if bool(x) else "false"
    if element_type in ("c64", "c128"):
        return f"({_fmt(x.real, 'f64')}, {_fmt(x.imag, 'f64')})"
    if np.issubdtype(type(x), np.integer) or isinstance(x, (int, np.integer)):
        return str(int(x))
    f = float(x)
    if math.isnan(f):
        return "-nan" if math.copysign(1.0, f) < 0 else "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    r = repr(f)
    return r[:-2] if r.endswith(".0") else r


def literal_text(value: np.ndarray | list, shape: Shape) -> str:
    """XLA's text for a literal (the part inside ``constant(...)``)."""
    if shape.is_tuple:
        parts = [literal_text(v, s) for v, s in zip(value, shape.tuple_shapes, strict=True)]
        return "(" + ", ".join(parts) + ")"
    et = shape.element_type

    def rec(a: np.ndarray) -> str:
        if a.ndim == 0:
            return _fmt(a[()], et)
        if a.ndim == 1:
            return "{" + ", ".join(_fmt(x, et) for x in a) + "}"
        return "{ " + ", ".join(rec(x) for x in a) + " }"

    return rec(np.asarray(value))
