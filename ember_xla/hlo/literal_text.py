"""Constant literals in HLO text: the values of a ``constant(...)`` for its shape, read into
the literal dict form of ``HloInstructionProto`` (``hlo.literal``)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ember_xla.hlo.cursor import Cursor
from ember_xla.hlo.literal import literal_from_numpy
from ember_xla.hlo.shape import Shape, shape_to_dict


def parse_literal(c: Cursor, shape: Shape) -> dict[str, Any]:
    """The literal of a constant of ``shape`` (nested braces, tuples in parentheses) in
    ``HloInstructionProto.literal`` dict form."""
    if shape.is_tuple:
        c.expect("(")
        parts = []
        for i, s in enumerate(shape.tuple_shapes):
            if i:
                c.expect(",")
            parts.append(parse_literal(c, s))
        c.expect(")")
        return {"shape": shape_to_dict(shape), "tuple_literals": parts}
    start = c.pos
    toks: list[str] = []
    _literal_values(c, toks)
    try:
        arr = _literal_array(toks, shape)
    except (ValueError, OverflowError, TypeError) as e:
        raise c.error(f"bad literal for {shape}: {e}", start) from None
    return literal_from_numpy(arr, shape)


def _literal_values(c: Cursor, out: list[str]) -> None:
    if c.eat("{"):
        while not c.eat("}"):
            _literal_values(c, out)
            c.eat(",")
        return
    if c.peek("("):  # complex (re, im)
        c.expect("(")
        re_ = c.number_token()
        c.expect(",")
        im = c.number_token()
        c.expect(")")
        out.append(f"complex:{re_}:{im}")
        return
    if c.peek("..."):
        raise c.error("elided constant ('{...}'): XLA printed this literal without its "
                      "values; export the HLO with large constants printed in full (e.g. "
                      "as_hlo_text(True)) or use the HloModuleProto")
    out.append(c.number_token())


def _literal_array(toks: list[str], shape: Shape) -> np.ndarray:
    if len(toks) != shape.size:
        raise ValueError(f"{len(toks)} values for {shape.size} elements")
    et = shape.element_type
    if et == "pred":
        vals: list[Any] = [t in ("true", "1") for t in toks]
    elif et.startswith(("s", "u")):
        vals = [int(t) for t in toks]
    elif et.startswith("c"):
        vals = [complex(float(t.split(":")[1]), float(t.split(":")[2])) for t in toks]
    else:
        vals = [float(re.sub(r"\(.*\)$", "", t)) for t in toks]
    return np.array(vals, dtype=shape.dtype).reshape(shape.dims)
