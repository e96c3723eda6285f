"""``name=value`` text of an HLO instruction attribute -> its proto-dict fields
(``parse_attr``, one parser per attribute name registered with ``parser_for``); the
structured ones (shardings, frontend attributes, metadata, control predecessors) are in
``attr_parse_meta``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_xla.hlo.attr_text import DOT_TEXT_FIELDS, GATHER_FIELDS, SCATTER_FIELDS
from ember_xla.hlo.cursor import Cursor
from ember_xla.hlo.shape import shape_to_dict

Parser = Callable[[Cursor, dict[str, Any], str, str], None]
_PARSERS: dict[str, Parser] = {}


def parser_for(*names: str) -> Callable[[Parser], Parser]:
    def deco(fn: Parser) -> Parser:
        for n in names:
            _PARSERS[n] = fn
        return fn

    return deco


def _xs(c: Cursor) -> list[int]:
    """``2x3x4`` (or a single integer)."""
    return [int(x) for x in c.word().split("x")]


def parse_attr(name: str, c: Cursor, attrs: dict[str, Any], opcode: str) -> None:
    """Parse the value of attribute ``name`` at the cursor into ``attrs``."""
    fn = _PARSERS.get(name)
    if fn is None:
        raise c.error(f"unsupported attribute {name!r} on {opcode}")
    start = c.pos
    try:
        fn(c, attrs, opcode, name)
    except ValueError as e:
        if hasattr(e, "line"):
            raise
        raise c.error(f"bad value for {name}: {e}", start) from None


@parser_for("dimensions")
def _p_dims(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["dimensions"] = c.int_list()


@parser_for("iota_dimension")
def _p_iota(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["dimensions"] = [c.integer()]


@parser_for("index")
def _p_index(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["tuple_index"] = c.integer()


@parser_for("slice")
def _p_slice(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    out = []
    while not c.eat("}"):
        c.expect("[")
        nums = [c.integer()]
        while c.eat(":"):
            nums.append(c.integer())
        c.expect("]")
        if len(nums) not in (2, 3):
            raise c.error("expected [start:limit] or [start:limit:stride]")
        out.append({"start": nums[0], "limit": nums[1], "stride": nums[2] if len(nums) > 2 else 1})
        c.eat(",")
    a["slice_dimensions"] = out


@parser_for("dynamic_slice_sizes")
def _p_dss(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["dynamic_slice_sizes"] = c.int_list()


@parser_for("padding")
def _p_padding(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    if c.peek("{"):
        c.expect("{")
        c.expect("}")
        a["padding_config"] = {}
        return
    dims = []
    for part in c.word().split("x"):
        nums = [int(x) for x in part.split("_")]
        if len(nums) not in (2, 3):
            raise c.error(f"expected low_high[_interior] padding, got {part!r}")
        d = {"edge_padding_low": nums[0], "edge_padding_high": nums[1]}
        if len(nums) == 3:
            d["interior_padding"] = nums[2]
        dims.append(d)
    a["padding_config"] = {"dimensions": dims}


@parser_for("window")
def _p_window(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    fields: dict[str, list[Any]] = {}
    while not c.eat("}"):
        key = c.name("a window field")
        c.expect("=")
        if key == "pad":
            fields[key] = [tuple(int(x) for x in p.split("_")) for p in c.word().split("x")]
        elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            fields[key] = _xs(c)
        else:
            raise c.error(f"unknown window field {key!r}")
    n = len(fields.get("size", []))
    dims = []
    for i in range(n):
        lo, hi = fields["pad"][i] if "pad" in fields else (0, 0)
        d = {"size": fields["size"][i],
             "stride": fields.get("stride", [1] * n)[i],
             "padding_low": lo, "padding_high": hi,
             "window_dilation": fields.get("rhs_dilate", [1] * n)[i],
             "base_dilation": fields.get("lhs_dilate", [1] * n)[i]}
        if fields.get("rhs_reversal", [0] * n)[i]:
            d["window_reversal"] = True
        dims.append(d)
    a["window"] = {"dimensions": dims}


@parser_for("dim_labels")
def _p_dim_labels(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    text = c.word()
    try:
        lhs_rhs, out = text.split("->")
        lhs, rhs = lhs_rhs.split("_")
    except ValueError:
        raise c.error(f"expected dim_labels like b01f_01io->b01f, got {text!r}") from None

    def part(s: str, b: str, f: str, names: tuple[str, str, str]) -> dict[str, Any]:
        sp = sorted((int(ch), i) for i, ch in enumerate(s) if ch.isdigit())
        return {names[0]: s.index(b), names[1]: s.index(f), names[2]: [i for _, i in sp]}

    d: dict[str, Any] = {}
    d.update(part(lhs, "b", "f", ("input_batch_dimension", "input_feature_dimension",
                                  "input_spatial_dimensions")))
    d.update(part(rhs, "i", "o", ("kernel_input_feature_dimension",
                                  "kernel_output_feature_dimension",
                                  "kernel_spatial_dimensions")))
    d.update(part(out, "b", "f", ("output_batch_dimension", "output_feature_dimension",
                                  "output_spatial_dimensions")))
    a["convolution_dimension_numbers"] = d


@parser_for("feature_group_count", "batch_group_count", "exponent_bits", "mantissa_bits",
         "feature_index", "k", "channel_id")
def _p_int_field(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a[key] = c.integer()


@parser_for(*DOT_TEXT_FIELDS)
def _p_dot(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a.setdefault("dot_dimension_numbers", {})[DOT_TEXT_FIELDS[key]] = c.int_list()


@parser_for("operand_precision")
def _p_precision(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    vals = c.braced(lambda: c.word().upper())
    a.setdefault("precision_config", {})["operand_precision"] = vals


@parser_for("algorithm")
def _p_algorithm(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    w = c.word()
    if op == "rng-bit-generator":
        a["rng_algorithm"] = w.upper()
    else:
        a.setdefault("precision_config", {})["algorithm"] = "ALG_" + w.upper()


@parser_for("direction")
def _p_direction(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    w = c.word()
    if w not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        raise c.error(f"expected a comparison direction (EQ NE LT LE GT GE), got {w!r}")
    a["comparison_direction"] = w


@parser_for("type")
def _p_cmp_type(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["comparison_type"] = c.word()


@parser_for(*{k for k in GATHER_FIELDS + SCATTER_FIELDS})
def _p_dnums(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    field = "gather_dimension_numbers" if op == "gather" else "scatter_dimension_numbers"
    a.setdefault(field, {})[key] = c.integer() if key == "index_vector_dim" else c.int_list()


@parser_for("slice_sizes")
def _p_slice_sizes(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["gather_slice_sizes"] = c.int_list()


def parse_bool(c: Cursor) -> bool:
    w = c.word()
    if w not in ("true", "false"):
        raise c.error(f"expected true or false, got {w!r}")
    return w == "true"


@parser_for("indices_are_sorted", "unique_indices", "is_stable", "largest",
         "custom_call_has_side_effect", "use_global_device_ids", "constrain_layout",
         "is_host_transfer", "is_composite")
def _p_bool_field(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a[key] = parse_bool(c)


@parser_for("epsilon")
def _p_epsilon(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["epsilon"] = float(c.number_token())


@parser_for("kind")
def _p_kind(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["fusion_kind"] = c.word()


@parser_for("distribution")
def _p_distribution(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["distribution"] = c.word().upper()


@parser_for("fft_type")
def _p_fft_type(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["fft_type"] = c.word()


@parser_for("fft_length")
def _p_fft_length(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["fft_length"] = c.int_list()


@parser_for("left_side", "unit_diagonal", "lower", "transpose_a")
def _p_solve(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    if op == "cholesky":
        a.setdefault("cholesky_options", {})["lower"] = parse_bool(c)
    else:
        opts = a.setdefault("triangular_solve_options", {})
        opts[key] = c.word() if key == "transpose_a" else parse_bool(c)


@parser_for("custom_call_target")
def _p_target(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["custom_call_target"] = c.string()


@parser_for("api_version")
def _p_api_version(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["custom_call_api_version"] = c.word()


@parser_for("schedule")
def _p_schedule(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["custom_call_schedule"] = c.word()


@parser_for("backend_config")
def _p_backend_config(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    text = c.balanced() if c.peek("{") else c.string()
    a["backend_config"] = text.encode("utf-8")


@parser_for("operand_layout_constraints")
def _p_olc(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    """A custom-call's operand layouts: their presence constrains the layouts (XLA's
    ``constrain_layout``, which the text never spells on a custom-call)."""
    a["operand_shapes_with_layout"] = c.braced(lambda: shape_to_dict(c.shape().laid_out()))
    a["constrain_layout"] = True


@parser_for("output_to_operand_aliasing")
def _p_aliasing(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    def entry() -> dict[str, Any]:
        osi = c.int_list()
        c.expect(":")
        c.expect("(")
        idx = c.integer()
        c.expect(",")
        isi = c.int_list()
        c.expect(")")
        return {"output_shape_index": osi, "operand_index": idx, "operand_shape_index": isi}

    a["output_operand_aliasing"] = c.braced(entry)


@parser_for("replica_groups")
def _p_replica_groups(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["replica_groups"] = c.braced(lambda: {"replica_ids": c.int_list()})


@parser_for("parameter_replication")
def _p_param_repl(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["parameter_replication"] = {"replicated_at_leaf_buffers": c.braced(lambda: parse_bool(c))}


@parser_for("infeed_config", "outfeed_config")
def _p_feed_config(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a[key] = c.string().encode()


@parser_for("outfeed_shape")
def _p_outfeed_shape(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["outfeed_shape"] = shape_to_dict(c.shape())


@parser_for("async_execution_thread")
def _p_thread(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["async_execution_thread"] = c.string()


