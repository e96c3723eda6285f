"""HLO instruction attributes -> XLA's text spellings (``print_attrs``); the reading back
is ``attr_parse``, the shared vocabulary ``attr_text``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember_xla.hlo.attr_text import (
    DOT_TEXT_FIELDS,
    GATHER_FIELDS,
    NEEDS_DIMENSIONS,
    SCATTER_FIELDS,
    TEXTLESS_FIELDS,
    bool_text,
    ints_text,
    quote,
)
from ember_xla.hlo.extensions import encode_extensions
from ember_xla.hlo.shape import shape_from_dict


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
            parts.append(f"{k}={quote(v)}")
        elif isinstance(v, bool):
            parts.append(f"{k}={bool_text(v)}")
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
    "is_host_transfer", "is_composite", "exponent_bits", "mantissa_bits", "feature_index", "k",
    "channel_id",
    "epsilon", "fusion_kind", "distribution", "rng_algorithm", "fft_type", "fft_length",
    "triangular_solve_options", "cholesky_options", "custom_call_target",
    "operand_shapes_with_layout", "output_operand_aliasing", "custom_call_schedule",
    "custom_call_api_version", "backend_config", "replica_groups", "collective_device_list",
    "parameter_replication",
    "infeed_config", "outfeed_config", "outfeed_shape", "async_execution_thread", "sharding"})


def _device_list_groups(cdl: dict[str, Any]) -> list[dict[str, Any]]:
    """A collective's ``collective_device_list`` as explicit replica groups: its
    ``replica_groups``, or its iota form expanded (``iota(prod(reshape_dims))`` reshaped,
    transposed by ``iota_transpose_perm`` and cut into ``num_replica_groups`` groups)."""
    if "iota_replica_group_list" not in cdl:
        return list(cdl.get("replica_groups", []))
    iota = cdl["iota_replica_group_list"]
    dims = [int(x) for x in iota.get("iota_reshape_dims", [])]
    perm = [int(x) for x in iota.get("iota_transpose_perm", [])] or list(range(len(dims)))
    ids = np.arange(int(np.prod(dims))).reshape(dims).transpose(perm)
    ids = ids.reshape(int(iota.get("num_replica_groups", 0)),
                      int(iota.get("num_devices_per_group", 0)))
    return [{"replica_ids": [int(x) for x in row]} for row in ids]


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
        out.append(f"dimensions={ints_text(dims or [])}")
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
            out.append(f"dynamic_slice_sizes={ints_text(a.pop('dynamic_slice_sizes'))}")
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
            for tname, field in DOT_TEXT_FIELDS.items():
                # the contracting dims always, as XLA prints them (an outer product's are
                # empty: without them the text would parse to a dot with no dimension numbers)
                if dd.get(field) or "contracting" in field:
                    out.append(f"{tname}={ints_text(dd.get(field, []))}")
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
            for k in GATHER_FIELDS:
                if k == "index_vector_dim":
                    out.append(f"index_vector_dim={g.get(k, 0)}")
                elif k in ("offset_dims", "collapsed_slice_dims", "start_index_map") or g.get(k):
                    out.append(f"{k}={ints_text(g.get(k, []))}")
        if "gather_slice_sizes" in a:
            out.append(f"slice_sizes={ints_text(a.pop('gather_slice_sizes'))}")
        if "scatter_dimension_numbers" in a:
            s = a.pop("scatter_dimension_numbers")
            for k in SCATTER_FIELDS:
                if k == "index_vector_dim":
                    out.append(f"index_vector_dim={s.get(k, 0)}")
                elif k in SCATTER_FIELDS[:3] or s.get(k):
                    out.append(f"{k}={ints_text(s.get(k, []))}")
    if not _GROUP_C.isdisjoint(a):
        for key in ("indices_are_sorted", "unique_indices", "is_stable", "largest",
                    "custom_call_has_side_effect", "use_global_device_ids", "constrain_layout",
                    "is_host_transfer", "is_composite"):
            if key in a:
                v = a.pop(key)
                if v and not (key == "constrain_layout" and opcode == "custom-call"):
                    out.append(f"{key}={bool_text(v)}")  # a custom-call's: its layouts
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
            out.append(f"fft_length={ints_text(a.pop('fft_length'))}")
        if "triangular_solve_options" in a:
            t = a.pop("triangular_solve_options")
            for k in ("left_side", "lower", "unit_diagonal"):
                out.append(f"{k}={bool_text(t.get(k, False))}")
            out.append(f"transpose_a={t.get('transpose_a', 'NO_TRANSPOSE')}")
        if "cholesky_options" in a:
            out.append(f"lower={bool_text(a.pop('cholesky_options').get('lower', False))}")
        if "custom_call_target" in a:
            out.append(f"custom_call_target={quote(a.pop('custom_call_target'))}")
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
                out.append("backend_config=" + (text if text.startswith("{") else quote(text)))
        groups = (a.pop("replica_groups") if "replica_groups" in a
                  else _device_list_groups(a.pop("collective_device_list"))
                  if "collective_device_list" in a else None)
        if groups is not None:
            gs = ["{" + ",".join(map(str, g.get("replica_ids", []))) + "}" for g in groups]
            out.append("replica_groups={" + ",".join(gs) + "}")
        if "parameter_replication" in a:
            pr = a.pop("parameter_replication").get("replicated_at_leaf_buffers", [])
            out.append("parameter_replication={" + ",".join(bool_text(x) for x in pr) + "}")
        for key in ("infeed_config", "outfeed_config"):
            if key in a:
                raw = a.pop(key)
                text = raw.decode() if isinstance(raw, bytes) else raw
                out.append(f"{key}={quote(text)}")
        if "outfeed_shape" in a:
            out.append("outfeed_shape=" + shape_from_dict(a.pop("outfeed_shape")).to_text())
        if "async_execution_thread" in a:
            out.append(f"async_execution_thread={quote(a.pop('async_execution_thread'))}")
        if "sharding" in a:
            out.append("sharding=" + _sharding_text(a.pop("sharding")))
    fa = a.pop("frontend_attributes", {}).get("map", {})
    if fa:
        out.append("frontend_attributes={" + ",".join(
            f"{k}={quote(v)}" for k, v in sorted(fa.items())) + "}")
    md = a.pop("metadata", None)
    if md:
        out.append("metadata=" + _metadata_text(md))
    for key in TEXTLESS_FIELDS:
        a.pop(key, None)
    if a:
        raise ValueError(f"fields {sorted(a)} of a {opcode} cannot be printed as HLO text")
    return out


