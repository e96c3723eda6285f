"""Text codecs for HLO instruction attributes (proto-dict fields <-> ``name=value`` text): the
vocabulary both directions share (field groups, integer lists, string quoting, booleans).
``attr_print.print_attrs`` turns an instruction's attributes into XLA's text spellings;
``attr_parse.parse_attr`` reads one ``name=value`` back into the same proto-dict fields
(``attr_parse_meta``: shardings, frontend attributes, metadata, control predecessors).
tests/hlo check that the two stay each other's inverse.
"""

from __future__ import annotations

import re
from typing import Any

# Fields that have no text form and carry no semantics (debug or statistics data).
# (and fields a newer XLA wrote that the installed schema does not know).
TEXTLESS_FIELDS = {"statistics_viz", "original_value", "__unknown_fields__"}
NEEDS_DIMENSIONS = {
    "broadcast", "reduce", "transpose", "reverse", "concatenate", "sort", "map", "all-gather",
    "reduce-scatter", "all-to-all",
}

GATHER_FIELDS = ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
           "operand_batching_dims", "start_indices_batching_dims")
SCATTER_FIELDS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
            "index_vector_dim", "input_batching_dims", "scatter_indices_batching_dims")
DOT_TEXT_FIELDS = {"lhs_batch_dims": "lhs_batch_dimensions",
             "lhs_contracting_dims": "lhs_contracting_dimensions",
             "rhs_batch_dims": "rhs_batch_dimensions",
             "rhs_contracting_dims": "rhs_contracting_dimensions"}


def ints_text(xs: list[int]) -> str:
    return "{" + ",".join(str(int(x)) for x in xs) + "}"


_ESCAPES = {i: f"\\x{i:02x}" for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\t"): "\\t"})
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def quote(s: str) -> str:
    if type(s) is not str:  # any other iterable of characters, one at a time
        return '"' + "".join(_ESCAPES.get(ord(ch), ch) for ch in s) + '"'
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    return '"' + s.translate(_ESCAPES) + '"'


def bool_text(b: Any) -> str:
    return "true" if b else "false"
