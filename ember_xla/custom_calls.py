"""The one registry of ``ember.*`` custom-call targets: name, operand roles, attributes and the
FFI symbol of each, plus the ``backend_config`` codec (the MLIR dictionary XLA's typed FFI reads,
see docs/CUSTOM_CALL.md). Rewrites, native kernels, the jit/ops front ends and the DAE compiler
all look targets up here instead of spelling names."""

from __future__ import annotations

import dataclasses
import math
import re
import struct
from typing import Any

from ember_xla.hlo.extensions import register_attribute_encoder

#: Attributes every kernel takes, in the order they are printed (the handler looks names up).
KERNEL_ATTRS = ("combiner", "index_bits", "index_mode", "init", "weighted", "wrap_negative")


#: ember.padded_bag also takes ``sum_order``: "sequential" (row after row), "sequential_fma"
#: (weighted rows with one fused multiply-add each), "blocked" (the blocks of 4 / 16 / 256
#: rows that XLA:CPU's YNNPACK reduce uses; native/blocked_sum.h), "vector8" (8 lanes folded
#: in halves, XLA:CPU's vectorized loop for 25-32 rows) or "tree32" (XLA's tree-reduction
#: windows of 32 rows; native/window_sum.h); for max/min bags "reduce_loop" (XLA's own reduce
#: loop) or "ynn_groups4" (YNNPACK's groups of 4 rows), each with its NaN and signed-zero
#: semantics (native/padded_minmax.h). And ``row_type``: "" (the rows as the table stores them)
#: or "bf16" (an f32 table's values rounded to bf16 as they are read: XLA's gather of
#: ``convert(table, bf16)``, flax ``nn.Embed(dtype=bfloat16)`` over f32 parameters; unweighted
#: bags in a sum order or the sequential max/min).
PADDED_ATTRS = (*KERNEL_ATTRS, "row_type", "sum_order")
MINMAX_ORDERS = ("reduce_loop", "ynn_groups4")
SUM_ORDERS = ("sequential", "sequential_fma", "blocked", "vector8", "tree32", *MINMAX_ORDERS)

#: Attributes of ember.multi_segment_reduce: one comma-separated combiner and init per result
#: (``combiners="sum,max"``, ``inits="0.0,-inf"``; inits as ``repr(float)`` prints them).
MULTI_ATTRS = ("combiners", "index_bits", "index_mode", "inits", "weighted", "wrap_negative")

#: Attributes of the ember.emulate target (strings; emulator/timing_cc.py: emulate_attributes).
EMULATE_ATTRS = ("cluster", "program", "target")


@dataclasses.dataclass(frozen=True)
class Target:
    name: str                       # custom_call_target, e.g. "ember.segment_reduce"
    kind: str                       # the cluster kind, e.g. "segment_reduce"
    operand_roles: tuple[str, ...]  # without the optional trailing "weights"
    ffi_symbol: str                 # the handler exported by libember_kernels.so
    weights: bool = True            # may take a trailing weights operand
    grouped: bool = False           # operands repeat per table; tuple result
    attributes: tuple[str, ...] = KERNEL_ATTRS
    library: str = "kernels"        # "kernels": libember_kernels.so; "emulator": the emulator's
    direction: str = "forward"      # "backward": a lookup's gradient (and optimizer update)


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("ember.segment_reduce", "segment_reduce", ("table", "indices", "segment_ids"),
           "EmberSegmentReduce"),
    Target("ember.padded_bag", "padded_bag", ("table", "ids"), "EmberPaddedBag",
           attributes=PADDED_ATTRS),
    Target("ember.offsets_bag", "offsets_bag", ("table", "indices", "offsets"),
           "EmberOffsetsBag"),
    Target("ember.grouped_segment_reduce", "grouped_segment_reduce",
           ("table", "indices", "segment_ids"), "EmberGroupedSegmentReduce",
           weights=False, grouped=True),
    # the same operands; one result: the tables' results concatenated along dimension 1
    Target("ember.grouped_segment_reduce_concat", "grouped_segment_reduce_concat",
           ("table", "indices", "segment_ids"), "EmberGroupedSegmentReduceConcat",
           weights=False, grouped=True),
    # one lookup, several segment reductions (sum and max of the same gathered rows): tuple of
    # results, one per combiner, the rows read once (rewrites/multi_output.py)
    Target("ember.multi_segment_reduce", "multi_segment_reduce",
           ("table", "indices", "segment_ids"), "EmberMultiSegmentReduce",
           attributes=MULTI_ATTRS),
    # the backward of a row lookup: scatter-add of per-lookup gradient rows into a zero [V, D]
    # table, bit-identical to XLA's scatter (rewrites/patterns/scatter_grad.py)
    Target("ember.scatter_grad", "scatter_grad", ("indices", "updates"), "EmberScatterGrad",
           weights=False, attributes=(), direction="backward"),
    # that gradient fused with an optimizer update of the touched rows, in place (the results
    # alias the table and slot operands; rewrites/fuse_optimizer.py)
    Target("ember.sparse_sgd", "sparse_sgd", ("table", "indices", "updates", "scale"),
           "EmberSparseSgd", weights=False, attributes=(), direction="backward"),
    Target("ember.sparse_adagrad", "sparse_adagrad",
           ("table", "accumulator", "indices", "updates", "scale", "eps"), "EmberSparseAdagrad",
           weights=False, attributes=(), direction="backward"),
    # Keras 3's Adagrad: the same operands (scale = lr), t - (lr * g) * rsqrt(g * g + a + eps)
    Target("ember.sparse_adagrad_keras", "sparse_adagrad_keras",
           ("table", "accumulator", "indices", "updates", "scale", "eps"),
           "EmberSparseAdagradKeras", weights=False, attributes=(), direction="backward"),
    # rowwise Adagrad (one accumulator per row: FBGEMM's EXACT_ROWWISE_ADAGRAD); the results
    # alias the table and its accumulator[V]; lr_folded: lr is a constant XLA multiplies into
    # the per-row reciprocal (t - g * (r * lr)), else t - (lr * g) * r; sum_order: the order
    # of sum(g * g) over a row (native/row_mean_order.py: XLA:CPU's for the shape)
    Target("ember.sparse_rowwise_adagrad", "sparse_rowwise_adagrad",
           ("table", "accumulator", "indices", "updates", "scale", "eps"),
           "EmberSparseRowwiseAdagrad", weights=False, attributes=("lr_folded", "sum_order"),
           direction="backward"),
    # a TF/Keras optimizer's sparse apply: whole rows scattered straight into a variable
    # (ResourceScatterSub / ResourceScatterAdd), the updates applied one by one in index
    # order as XLA's scatter applies them; the result aliases the operand
    # (rewrites/patterns/sparse_apply.py, native/ordered_scatter.cc)
    Target("ember.ordered_scatter", "ordered_scatter", ("operand", "indices", "updates"),
           "EmberOrderedScatter", weights=False, attributes=("combiner",),
           direction="backward"),
    # emulate mode: the cluster's operands in, its results out; runs the cluster's DAE program
    # on the C++ emulator (docs/DAE_PROGRAM.md, "The FFI target"). Not a kernel cluster.
    Target("ember.emulate", "emulate", (), "EmberEmulate", weights=False,
           attributes=EMULATE_ATTRS, library="emulator"),
)}

SEGMENT_REDUCE = TARGETS["ember.segment_reduce"]
PADDED_BAG = TARGETS["ember.padded_bag"]
OFFSETS_BAG = TARGETS["ember.offsets_bag"]
GROUPED_SEGMENT_REDUCE = TARGETS["ember.grouped_segment_reduce"]
GROUPED_SEGMENT_REDUCE_CONCAT = TARGETS["ember.grouped_segment_reduce_concat"]
MULTI_SEGMENT_REDUCE = TARGETS["ember.multi_segment_reduce"]
EMULATE = TARGETS["ember.emulate"]
SCATTER_GRAD = TARGETS["ember.scatter_grad"]
SPARSE_SGD = TARGETS["ember.sparse_sgd"]
SPARSE_ADAGRAD = TARGETS["ember.sparse_adagrad"]
SPARSE_ADAGRAD_KERAS = TARGETS["ember.sparse_adagrad_keras"]
SPARSE_ROWWISE_ADAGRAD = TARGETS["ember.sparse_rowwise_adagrad"]
ORDERED_SCATTER = TARGETS["ember.ordered_scatter"]


def target_of_kind(kind: str) -> Target:
    for t in TARGETS.values():
        if t.kind == kind:
            return t
    raise KeyError(f"no ember target for cluster kind {kind!r}")


def is_ember_call(op: Any) -> bool:
    """A kernel cluster's custom-call (``ember.emulate`` calls are not clusters to rewrite or
    lower again: see ``is_emulate_call``)."""
    return (getattr(op, "opcode", None) == "custom-call"
            and op.attributes.get("custom_call_target") in TARGETS
            and op.attributes.get("custom_call_target") != EMULATE.name)


def is_emulate_call(op: Any) -> bool:
    return (getattr(op, "opcode", None) == "custom-call"
            and op.attributes.get("custom_call_target") == EMULATE.name)


# -- backend_config codec ----------------------------------------------------------------------
def mlir_f64(x: float) -> str:
    """An f64 literal MLIR parses: a decimal point or exponent always; inf/NaN as hex bits."""
    if math.isnan(x) or math.isinf(x):
        bits = struct.unpack("<Q", struct.pack("<d", float(x)))[0]
        return f"0x{bits:016X} : f64"
    mantissa, e, exponent = repr(float(x)).partition("e")
    if "." not in mantissa:  # MLIR needs the point even with an exponent: 3e+38 -> 3.0e+38
        mantissa += ".0"
    return f"{mantissa}{e}{exponent} : f64"


def _encode(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v} : i64"
    if isinstance(v, float):
        return mlir_f64(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"cannot encode attribute value {v!r}")


def encode_backend_config(attrs: dict[str, Any], keys: tuple[str, ...] = KERNEL_ATTRS) -> bytes:
    missing = [k for k in keys if k not in attrs]
    if missing:
        raise ValueError(f"custom-call attributes missing: {missing}")
    return ("{" + ", ".join(f"{k} = {_encode(attrs[k])}" for k in keys) + "}").encode()


_ITEM = re.compile(
    r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('
    r'"(?:[^"\\]|\\.)*"'                       # string
    r'|true|false'                             # bool
    r'|0x[0-9A-Fa-f]+\s*:\s*f64'               # f64 bit pattern
    r'|[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?\s*(?::\s*[a-z0-9]+)?'  # number [: type]
    r')\s*(,|\})')


def decode_backend_config(config: bytes | str) -> dict[str, Any]:
    """The attributes of an ember custom-call's ``backend_config`` (inverse of
    ``encode_backend_config``). Raises ValueError naming what is malformed."""
    text = config.decode() if isinstance(config, bytes) else config
    text = text.strip()
    if not text.startswith("{") or not text.endswith("}"):
        raise ValueError(f"backend_config is not an MLIR dictionary: {text[:60]!r}")
    out: dict[str, Any] = {}
    pos = 1
    if text[1:].strip() == "}":
        return out
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if not m:
            raise ValueError(f"backend_config: cannot read {text[pos:pos + 40]!r}")
        key, raw, _end = m.groups()
        out[key] = _decode_value(raw.strip())
        pos = m.end()
    return out


def _decode_value(raw: str) -> Any:
    if raw.startswith('"'):
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    if raw in ("true", "false"):
        return raw == "true"
    value, _, typ = (p.strip() for p in raw.partition(":"))
    if value.startswith("0x"):
        return struct.unpack("<d", struct.pack("<Q", int(value, 16)))[0]
    if typ.startswith("f") or any(c in value for c in ".eE"):
        return float(value)
    return int(value)


#: The key under which an ember custom-call keeps its kernel attributes (structured, on the op);
#: they become ``backend_config`` only on export (``hlo.extensions``).
ATTRS_KEY = "ember"


def call_attributes(op: Any) -> dict[str, Any]:
    """The kernel attributes of an ember custom-call op: the structured ones on the op, or
    decoded from ``backend_config`` for a call read from a file."""
    if ATTRS_KEY in op.attributes:
        return dict(op.attributes[ATTRS_KEY])
    return decode_backend_config(op.attributes.get("backend_config", b""))


def _encode_call(attrs: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in attrs.items() if k != ATTRS_KEY}
    t = TARGETS.get(attrs.get("custom_call_target"))
    out["backend_config"] = encode_backend_config(attrs[ATTRS_KEY],
                                                  t.attributes if t else KERNEL_ATTRS)
    return out


register_attribute_encoder(ATTRS_KEY, _encode_call)
