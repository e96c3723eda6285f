"""Text codecs for HLO instruction attributes: proto-dict fields <-> ``name=value`` text.

``print_attrs`` turns an instruction's attributes into XLA's text spellings; ``parse_attr``
reads one ``name=value`` back into the same proto-dict fields. Both directions live together so
they stay each other's inverse.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ember_xla.hlo.cursor import Cursor
from ember_xla.hlo.extensions import encode_extensions
from ember_xla.hlo.shape import shape_from_dict, shape_to_dict

# Fields that have no text form and carry no semantics (debug or statistics data).
# (and fields a newer XLA wrote that the installed schema does not know).
TEXTLESS_FIELDS = {"statistics_viz", "original_value", "__unknown_fields__"}
NEEDS_DIMENSIONS = {
    "broadcast", "reduce", "transpose", "reverse", "concatenate", "sort", "map", "all-gather",
    "reduce-scatter", "all-to-all",
}

_GATHER = ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
           "operand_batching_dims", "start_indices_batching_dims")
_SCATTER = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
            "index_vector_dim", "input_batching_dims", "scatter_indices_batching_dims")
_DOT = ("lhs_batch_dimensions", "lhs_contracting_dimensions", "rhs_batch_dimensions",
        "rhs_contracting_dimensions")
_DOT_TEXT = {"lhs_batch_dims": "lhs_batch_dimensions",
             "lhs_contracting_dims": "lhs_contracting_dimensions",
             "rhs_batch_dims": "rhs_batch_dimensions",
             "rhs_contracting_dims": "rhs_contracting_dimensions"}


def _ints(xs: list[int]) -> str:
    return "{" + ",".join(str(int(x)) for x in xs) + "}"


_ESCAPES = {i: f"\\x{i:02x}" for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\t"): "\\t"})
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _quote(s: str) -> str:
    if type(s) is not str:  # any other iterable of characters, one at a time
        return '"' + "".join(_ESCAPES.get(ord(ch), ch) for ch in s) + '"'
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    return '"' + s.translate(_ESCAPES) + '"'


def _bool(b: Any) -> str:
    return "true" if b else "false"


# ------------------------------------------------------------------------------------------
# printing
# ------------------------------------------------------------------------------------------
def _window_text(w: dict[str, Any]) -> str:
    dims = w.get("dimensions", [])
    if not dims:
        return "{}"
    parts = ["size=" + "x".join(str(d.get("size", 0)) for d in dims)]

    def col(key: str, default: int) -> list[int]:
        return [int(d.get(key, default)) for d in dims]

    if any(x != 1 for x in col("stride", 1)):
        parts.append("stride=" + "x".join(map(str, col("stride", 1))))
    lo, hi = col("padding_low", 0), col("padding_high", 0)
    if any(lo) or any(hi):
        parts.append("pad=" + "x".join(f"{a}_{b}" for a, b in zip(lo, hi, strict=True)))
    if any(x != 1 for x in col("base_dilation", 1)):
        parts.append("lhs_dilate=" + "x".join(map(str, col("base_dilation", 1))))
    if any(x != 1 for x in col("window_dilation", 1)):
        parts.append("rhs_dilate=" + "x".join(map(str, col("window_dilation", 1))))
    rev = [1 if d.get("window_reversal") else 0 for d in dims]
    if any(rev):
        parts.append("rhs_reversal=" + "x".join(map(str, rev)))
    return "{" + " ".join(parts) + "}"


def _dim_labels(c: dict[str, Any]) -> str:
    def part(batch: str, feat: str, spatial: str, bchar: str, fchar: str) -> str:
        sp = c.get(spatial, [])
        chars = ["?"] * (2 + len(sp))
        chars[int(c.get(batch, 0))] = bchar
        chars[int(c.get(feat, 0))] = fchar
        for i, p in enumerate(sp):
            chars[int(p)] = str(i)
        return "".join(chars)

    lhs = part("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
               "b", "f")
    rhs = part("kernel_input_feature_dimension", "kernel_output_feature_dimension",
               "kernel_spatial_dimensions", "i", "o")
    out = part("output_batch_dimension", "output_feature_dimension",
               "output_spatial_dimensions", "b", "f")
    return f"{lhs}_{rhs}->{out}"


def _sharding_text(s: dict[str, Any]) -> str:
    t = s.get("type", "REPLICATED")
    if t == "REPLICATED":
        return "{replicated}"
    if t == "MANUAL":
        return "{manual}"
    if t == "MAXIMAL":
        return "{maximal device=" + str(s.get("tile_assignment_devices", [0])[0]) + "}"
    if t == "TUPLE":
        return "{" + ", ".join(_sharding_text(x) for x in s.get("tuple_shardings", [])) + "}"
    raise ValueError(f"sharding of type {t} cannot be printed as HLO text (not supported)")


def _metadata_text(m: dict[str, Any]) -> str:
    parts = []
    for k, v in m.items():
        if isinstance(v, str):
            parts.append(f"{k}={_quote(v)}")
        elif isinstance(v, bool):
            parts.append(f"{k}={_bool(v)}")
        elif isinstance(v, int):
            parts.append(f"{k}={v}")
        elif isinstance(v, list) and k == "profile_type":
            parts.append(f"{k}={{{','.join(str(x).lower() for x in v)}}}")
        else:
            raise ValueError(f"metadata field {k} cannot be printed as HLO text")
    return "{" + " ".join(parts) + "}"


def _shape_index(xs: list[int]) -> str:
    return "{" + ",".join(str(x) for x in xs) + "}"


# The keys print_attrs tests in each of its three runs of rare fields: an instruction with none
# of them skips the run in one test.
_GROUP_A = frozenset({
    "slice_dimensions", "dynamic_slice_sizes", "padding_config", "window",
    "convolution_dimension_numbers", "feature_group_count", "batch_group_count"})
_GROUP_B = frozenset({
    "dot_dimension_numbers", "precision_config", "comparison_direction", "comparison_type",
    "gather_dimension_numbers", "gather_slice_sizes", "scatter_dimension_numbers"})
_GROUP_C = frozenset({
    "indices_are_sorted", "unique_indices", "is_stable", "largest",
    "custom_call_has_side_effect", "use_global_device_ids", "constrain_layout",
    "is_host_transfer", "exponent_bits", "mantissa_bits", "feature_index", "k", "channel_id",
    "epsilon", "fusion_kind", "distribution", "rng_algorithm", "fft_type", "fft_length",
    "triangular_solve_options", "cholesky_options", "custom_call_target",
    "operand_shapes_with_layout", "output_operand_aliasing", "custom_call_schedule",
    "custom_call_api_version", "backend_config", "replica_groups", "parameter_replication",
    "infeed_config", "outfeed_config", "outfeed_shape", "async_execution_thread", "sharding"})


def print_attrs(opcode: str, attrs: dict[str, Any]) -> list[str]:
    """``name=value`` strings for every attribute (except parameter_number/literal and the
    called computations, which the printer places itself). Raises ValueError for fields that
    have no text form here."""
    a = dict(encode_extensions(attrs))
    a.pop("parameter_number", None)
    a.pop("literal", None)
    a.pop("control_predecessors", None)
    out: list[str] = []
    dims = a.pop("dimensions", None)
    if opcode == "iota":
        out.append(f"iota_dimension={(dims or [0])[0]}")
    elif dims is not None or opcode in NEEDS_DIMENSIONS:
        out.append(f"dimensions={_ints(dims or [])}")
    if "tuple_index" in a or opcode == "get-tuple-element":
        out.append(f"index={a.pop('tuple_index', 0)}")
    if not _GROUP_A.isdisjoint(a):
        if "slice_dimensions" in a:
            sl = []
            for d in a.pop("slice_dimensions"):
                st, lim, step = d.get("start", 0), d.get("limit", 0), d.get("stride", 1)
                sl.append(f"[{st}:{lim}]" if step == 1 else f"[{st}:{lim}:{step}]")
            out.append("slice={" + ", ".join(sl) + "}")
        if "dynamic_slice_sizes" in a:
            out.append(f"dynamic_slice_sizes={_ints(a.pop('dynamic_slice_sizes'))}")
        if "padding_config" in a:
            ds = a.pop("padding_config").get("dimensions", [])
            txt = []
            for d in ds:
                p = f"{d.get('edge_padding_low', 0)}_{d.get('edge_padding_high', 0)}"
                if d.get("interior_padding", 0):
                    p += f"_{d['interior_padding']}"
                txt.append(p)
            out.append("padding=" + "x".join(txt) if txt else "padding={}")
        if "window" in a:
            out.append("window=" + _window_text(a.pop("window")))
        if "convolution_dimension_numbers" in a:
            out.append("dim_labels=" + _dim_labels(a.pop("convolution_dimension_numbers")))
        for key in ("feature_group_count", "batch_group_count"):
            if key in a:
                v = a.pop(key)
                if v not in (0, 1):
                    out.append(f"{key}={v}")
    if not _GROUP_B.isdisjoint(a):
        if "dot_dimension_numbers" in a:
            dd = a.pop("dot_dimension_numbers")
            for tname, field in _DOT_TEXT.items():
                if dd.get(field):
                    out.append(f"{tname}={_ints(dd[field])}")
        if "precision_config" in a:
            pc = a.pop("precision_config")
            if pc.get("operand_precision"):
                ps = ",".join(str(p).lower() for p in pc["operand_precision"])
                out.append("operand_precision={" + ps + "}")
            if pc.get("algorithm") not in (None, "ALG_UNSET"):
                out.append("algorithm=" + str(pc["algorithm"]).lower()[len("alg_"):])
        if "comparison_direction" in a:
            out.append(f"direction={a.pop('comparison_direction')}")
        if "comparison_type" in a:
            out.append(f"type={a.pop('comparison_type')}")
        if "gather_dimension_numbers" in a:
            g = a.pop("gather_dimension_numbers")
            for k in _GATHER:
                if k == "index_vector_dim":
                    out.append(f"index_vector_dim={g.get(k, 0)}")
                elif k in ("offset_dims", "collapsed_slice_dims", "start_index_map") or g.get(k):
                    out.append(f"{k}={_ints(g.get(k, []))}")
        if "gather_slice_sizes" in a:
            out.append(f"slice_sizes={_ints(a.pop('gather_slice_sizes'))}")
        if "scatter_dimension_numbers" in a:
            s = a.pop("scatter_dimension_numbers")
            for k in _SCATTER:
                if k == "index_vector_dim":
                    out.append(f"index_vector_dim={s.get(k, 0)}")
                elif k in _SCATTER[:3] or s.get(k):
                    out.append(f"{k}={_ints(s.get(k, []))}")
    if not _GROUP_C.isdisjoint(a):
        for key in ("indices_are_sorted", "unique_indices", "is_stable", "largest",
                    "custom_call_has_side_effect", "use_global_device_ids", "constrain_layout",
                    "is_host_transfer"):
            if key in a:
                v = a.pop(key)
                if v:
                    out.append(f"{key}={_bool(v)}")
        for key in ("exponent_bits", "mantissa_bits", "feature_index", "k", "channel_id"):
            if key in a:
                out.append(f"{key}={a.pop(key)}")
        if "epsilon" in a:
            out.append(f"epsilon={repr(float(a.pop('epsilon')))}")
        if "fusion_kind" in a:
            out.append(f"kind={a.pop('fusion_kind')}")
        if "distribution" in a:
            out.append("distribution=" + str(a.pop("distribution")).lower())
        if "rng_algorithm" in a:
            out.append("algorithm=" + str(a.pop("rng_algorithm")).lower())
        if "fft_type" in a:
            out.append(f"fft_type={a.pop('fft_type')}")
        if "fft_length" in a:
            out.append(f"fft_length={_ints(a.pop('fft_length'))}")
        if "triangular_solve_options" in a:
            t = a.pop("triangular_solve_options")
            for k in ("left_side", "lower", "unit_diagonal"):
                out.append(f"{k}={_bool(t.get(k, False))}")
            out.append(f"transpose_a={t.get('transpose_a', 'NO_TRANSPOSE')}")
        if "cholesky_options" in a:
            out.append(f"lower={_bool(a.pop('cholesky_options').get('lower', False))}")
        if "custom_call_target" in a:
            out.append(f"custom_call_target={_quote(a.pop('custom_call_target'))}")
        if "operand_shapes_with_layout" in a:
            shapes = [shape_from_dict(s).to_text() for s in a.pop("operand_shapes_with_layout")]
            out.append("operand_layout_constraints={" + ", ".join(shapes) + "}")
        if "output_operand_aliasing" in a:
            items = []
            for e in a.pop("output_operand_aliasing"):
                items.append(f"{_shape_index(e.get('output_shape_index', []))}: "
                             f"({e.get('operand_index', 0)}, "
                             f"{_shape_index(e.get('operand_shape_index', []))})")
            out.append("output_to_operand_aliasing={" + ", ".join(items) + "}")
        if "custom_call_schedule" in a:
            v = a.pop("custom_call_schedule")
            if v != "SCHEDULE_NONE":
                out.append(f"schedule={v}")
        if "custom_call_api_version" in a:
            out.append(f"api_version={a.pop('custom_call_api_version')}")
        if "backend_config" in a:
            raw = a.pop("backend_config")
            text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            if text:
                out.append("backend_config=" + (text if text.startswith("{") else _quote(text)))
        if "replica_groups" in a:
            gs = ["{" + ",".join(map(str, g.get("replica_ids", []))) + "}"
                  for g in a.pop("replica_groups")]
            out.append("replica_groups={" + ",".join(gs) + "}")
        if "parameter_replication" in a:
            pr = a.pop("parameter_replication").get("replicated_at_leaf_buffers", [])
            out.append("parameter_replication={" + ",".join(_bool(x) for x in pr) + "}")
        for key in ("infeed_config", "outfeed_config"):
            if key in a:
                raw = a.pop(key)
                text = raw.decode() if isinstance(raw, bytes) else raw
                out.append(f"{key}={_quote(text)}")
        if "outfeed_shape" in a:
            out.append("outfeed_shape=" + shape_from_dict(a.pop("outfeed_shape")).to_text())
        if "async_execution_thread" in a:
            out.append(f"async_execution_thread={_quote(a.pop('async_execution_thread'))}")
        if "sharding" in a:
            out.append("sharding=" + _sharding_text(a.pop("sharding")))
    fa = a.pop("frontend_attributes", {}).get("map", {})
    if fa:
        out.append("frontend_attributes={" + ",".join(
            f"{k}={_quote(v)}" for k, v in sorted(fa.items())) + "}")
    md = a.pop("metadata", None)
    if md:
        out.append("metadata=" + _metadata_text(md))
    for key in TEXTLESS_FIELDS:
        a.pop(key, None)
    if a:
        raise ValueError(f"fields {sorted(a)} of a {opcode} cannot be printed as HLO text")
    return out


# ------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------
Parser = Callable[[Cursor, dict[str, Any], str, str], None]
_PARSERS: dict[str, Parser] = {}


def _parser(*names: str) -> Callable[[Parser], Parser]:
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


@_parser("dimensions")
def _p_dims(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["dimensions"] = c.int_list()


@_parser("iota_dimension")
def _p_iota(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["dimensions"] = [c.integer()]


@_parser("index")
def _p_index(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["tuple_index"] = c.integer()


@_parser("slice")
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


@_parser("dynamic_slice_sizes")
def _p_dss(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["dynamic_slice_sizes"] = c.int_list()


@_parser("padding")
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


@_parser("window")
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


@_parser("dim_labels")
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


@_parser("feature_group_count", "batch_group_count", "exponent_bits", "mantissa_bits",
         "feature_index", "k", "channel_id")
def _p_int_field(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a[key] = c.integer()


@_parser(*_DOT_TEXT)
def _p_dot(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a.setdefault("dot_dimension_numbers", {})[_DOT_TEXT[key]] = c.int_list()


@_parser("operand_precision")
def _p_precision(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    vals = []
    while not c.eat("}"):
        vals.append(c.word().upper())
        c.eat(",")
    a.setdefault("precision_config", {})["operand_precision"] = vals


@_parser("algorithm")
def _p_algorithm(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    w = c.word()
    if op == "rng-bit-generator":
        a["rng_algorithm"] = w.upper()
    else:
        a.setdefault("precision_config", {})["algorithm"] = "ALG_" + w.upper()


@_parser("direction")
def _p_direction(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    w = c.word()
    if w not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        raise c.error(f"expected a comparison direction (EQ NE LT LE GT GE), got {w!r}")
    a["comparison_direction"] = w


@_parser("type")
def _p_cmp_type(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["comparison_type"] = c.word()


@_parser(*{k for k in _GATHER + _SCATTER})
def _p_dnums(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    field = "gather_dimension_numbers" if op == "gather" else "scatter_dimension_numbers"
    a.setdefault(field, {})[key] = c.integer() if key == "index_vector_dim" else c.int_list()


@_parser("slice_sizes")
def _p_slice_sizes(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["gather_slice_sizes"] = c.int_list()


def _parse_bool(c: Cursor) -> bool:
    w = c.word()
    if w not in ("true", "false"):
        raise c.error(f"expected true or false, got {w!r}")
    return w == "true"


@_parser("indices_are_sorted", "unique_indices", "is_stable", "largest",
         "custom_call_has_side_effect", "use_global_device_ids", "constrain_layout",
         "is_host_transfer")
def _p_bool_field(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a[key] = _parse_bool(c)


@_parser("epsilon")
def _p_epsilon(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["epsilon"] = float(c.number_token())


@_parser("kind")
def _p_kind(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["fusion_kind"] = c.word()


@_parser("distribution")
def _p_distribution(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["distribution"] = c.word().upper()


@_parser("fft_type")
def _p_fft_type(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["fft_type"] = c.word()


@_parser("fft_length")
def _p_fft_length(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["fft_length"] = c.int_list()


@_parser("left_side", "unit_diagonal", "lower", "transpose_a")
def _p_solve(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    if op == "cholesky":
        a.setdefault("cholesky_options", {})["lower"] = _parse_bool(c)
    else:
        opts = a.setdefault("triangular_solve_options", {})
        opts[key] = c.word() if key == "transpose_a" else _parse_bool(c)


@_parser("custom_call_target")
def _p_target(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["custom_call_target"] = c.string()


@_parser("api_version")
def _p_api_version(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["custom_call_api_version"] = c.word()


@_parser("schedule")
def _p_schedule(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["custom_call_schedule"] = c.word()


@_parser("backend_config")
def _p_backend_config(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    text = c.balanced() if c.peek("{") else c.string()
    a["backend_config"] = text.encode("utf-8")


@_parser("operand_layout_constraints")
def _p_olc(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    shapes = []
    while not c.eat("}"):
        shapes.append(shape_to_dict(c.shape()))
        c.eat(",")
    a["operand_shapes_with_layout"] = shapes


@_parser("output_to_operand_aliasing")
def _p_aliasing(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    out = []
    while not c.eat("}"):
        osi = c.int_list()
        c.expect(":")
        c.expect("(")
        idx = c.integer()
        c.expect(",")
        isi = c.int_list()
        c.expect(")")
        out.append({"output_shape_index": osi, "operand_index": idx, "operand_shape_index": isi})
        c.eat(",")
    a["output_operand_aliasing"] = out


@_parser("replica_groups")
def _p_replica_groups(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    groups = []
    while not c.eat("}"):
        groups.append({"replica_ids": c.int_list()})
        c.eat(",")
    a["replica_groups"] = groups


@_parser("parameter_replication")
def _p_param_repl(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    vals = []
    while not c.eat("}"):
        vals.append(_parse_bool(c))
        c.eat(",")
    a["parameter_replication"] = {"replicated_at_leaf_buffers": vals}


@_parser("infeed_config", "outfeed_config")
def _p_feed_config(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a[key] = c.string().encode()


@_parser("outfeed_shape")
def _p_outfeed_shape(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["outfeed_shape"] = shape_to_dict(c.shape())


@_parser("async_execution_thread")
def _p_thread(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["async_execution_thread"] = c.string()


def _parse_sharding(c: Cursor) -> dict[str, Any]:
    c.expect("{")
    if c.peek("{") or c.peek("}"):
        parts = []
        while not c.eat("}"):
            parts.append(_parse_sharding(c))
            c.eat(",")
        return {"type": "TUPLE", "tuple_shardings": parts}
    w = c.word()
    if w == "replicated":
        out: dict[str, Any] = {"type": "REPLICATED"}
    elif w == "manual":
        out = {"type": "MANUAL"}
    elif w == "maximal":
        c.expect("device")
        c.expect("=")
        out = {"type": "MAXIMAL", "tile_assignment_dimensions": [1],
               "tile_assignment_devices": [c.integer()]}
    else:
        raise c.error(f"sharding {w!r} is not supported (only replicated, manual, maximal)")
    c.expect("}")
    return out


@_parser("sharding")
def _p_sharding(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    a["sharding"] = _parse_sharding(c)


@_parser("frontend_attributes")
def _p_frontend(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    m: dict[str, str] = {}
    while not c.eat("}"):
        key = c.name("a frontend attribute name")
        c.expect("=")
        m[key] = c.string() if c.peek('"') else c.word()
        c.eat(",")
    a["frontend_attributes"] = {"map": m}


_META_INT = {"source_line", "source_end_line", "source_column", "source_end_column",
             "stack_frame_id", "size_of_generated_code_in_bytes",
             "size_of_memory_working_set_in_bytes"}


# ``{op_name="..." source_file="..." source_line=12}``: up to _META_FAST_MAX fields, without
# escapes, commas or line breaks, read by one match (the groups alternate key, value).
_META_FAST_MAX = 12


def _meta_fast_pattern() -> re.Pattern[str]:
    item = (r'[ \t]*([A-Za-z_][A-Za-z0-9_]*)='
            r'("[^"\\]*+"|[-+]?[0-9]++|(?:true|false)(?![\w.\-+>$]))')
    inner = ""
    for _ in range(_META_FAST_MAX):
        inner = "(?:" + item + inner + ")?"
    return re.compile(r"\{" + inner + r"[ \t]*\}")


_META_FAST = _meta_fast_pattern()


def _fast_metadata(groups: tuple[str | None, ...]) -> dict[str, Any] | None:
    """The fields of a ``_META_FAST`` match, or None when a value has the wrong kind for its
    field (the general code then reports it)."""
    m: dict[str, Any] = {}
    for i in range(0, len(groups), 2):
        key = groups[i]
        if key is None:
            break
        value = groups[i + 1]
        first = value[0]
        if key in _META_INT:
            if first == '"' or first == "t" or first == "f":
                return None
            m[key] = int(value)
        elif key == "profile_type":
            return None
        elif first == '"':
            m[key] = value[1:-1]
        elif first == "t" or first == "f":
            m[key] = first == "t"
        else:
            return None
    return m


@_parser("metadata")
def _p_metadata(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.skip_ws()
    fast = _META_FAST.match(c.text, c.pos)
    if fast is not None:
        m = _fast_metadata(fast.groups())
        if m is not None:
            c.pos = fast.end()
            a["metadata"] = m
            return
    c.expect("{")
    m: dict[str, Any] = {}
    while not c.eat("}"):
        key = c.name("a metadata field")
        c.expect("=")
        if key in _META_INT:
            m[key] = c.integer()
        elif key == "profile_type":
            c.expect("{")
            vals = []
            while not c.eat("}"):
                vals.append(c.word().upper())
                c.eat(",")
            m[key] = vals
        elif c.peek('"'):
            m[key] = c.string()
        else:
            m[key] = _parse_bool(c)
        c.eat(",")
    a["metadata"] = m


@_parser("control-predecessors")
def _p_control(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.expect("{")
    names = []
    while not c.eat("}"):
        names.append(c.name("an instruction name"))
        c.eat(",")
    a["control_predecessors"] = names


@_parser("statistics", "origin")
def _p_ignored(c: Cursor, a: dict[str, Any], op: str, key: str) -> None:
    c.balanced()
