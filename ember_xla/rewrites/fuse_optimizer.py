"""Fuse the optimizer update into a lookup's gradient: an ``ember.scatter_grad`` whose dense
gradient only feeds an SGD or Adagrad update of a ``[V, D]`` f32 table becomes one
``ember.sparse_sgd`` / ``ember.sparse_adagrad`` call that reads and writes only the touched
rows of the table and of its accumulator, in place (``output_to_operand_aliasing``). A table
(or accumulator) that is an entry parameter the caller does not donate is not aliased: XLA
would first copy it into the result buffer, and the kernel writes the new table in one pass
instead (the touched rows updated, the others copied).

Exactness: a row without gradient must come out of the dense update unchanged. For
``t + g * s`` (optax ``sgd``: ``s = -lr``) and ``t - s * g`` (hand-written) that holds when
the scale is finite and of the right sign, for optax's ``adagrad`` also when ``eps >= 0``; the
kernels check both at run time and otherwise apply the update with ``g = 0`` to every row, as
XLA does. XLA:CPU contracts ``t + g * s`` into an FMA, and so do the kernels. Adagrad also
needs XLA's own ``rsqrt`` (an estimate refined by Newton-Raphson); it is fused only when
``native.rsqrt_probe`` finds the kernel's reproduction bit-identical on this machine. Rowwise
Adagrad needs XLA:CPU's order of the row-wise ``mean(g * g)`` (native/row_mean_order.py).

A TF/Keras sparse apply (``ember.ordered_scatter``, patterns/sparse_apply.py) is already the
update itself: its result is aliased with the variable, and the table's scatter-subtract of
``lr * g`` is reported as the fused ``sgd``.

Anything else (Adam, momentum, weight decay, clipping by global norm, a gradient also used
elsewhere) keeps its update in XLA, and the entry says why."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ember_xla.custom_calls import (
    ATTRS_KEY,
    ORDERED_SCATTER,
    SCATTER_GRAD,
    SPARSE_ADAGRAD,
    SPARSE_ADAGRAD_KERAS,
    SPARSE_ROWWISE_ADAGRAD,
    SPARSE_SGD,
    Target,
)
from ember_xla.hlo.literal import literal_from_numpy
from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.value import Value
from ember_xla.rewrites.fuse_rowwise import row_chain, row_user, row_value, rowwise_sum_order
from ember_xla.rewrites.refs import Ref, binary_combiner, scalar_constant
from ember_xla.rewrites.walk import NoMatch

REFUSED = ("the update is not one of the fused forms (SGD, Adagrad, Keras' Adagrad, rowwise "
           "Adagrad, each as below), e.g. the update of a row without gradient is not the "
           "identity (Adam, momentum, weight decay, global-norm clipping ...), or the gradient "
           "is used elsewhere: the update stays in XLA, the gradient kernel replaces the "
           "scatter")


@dataclasses.dataclass
class FusedUpdate:
    target: Target
    optimizer: str
    inputs: list[Value | None]   # the fused call's operands (scalars as f32[] values; None: 0)
    replaced: list[Value]        # the dense results the call's outputs replace, in order
    owned: list[Operation]       # the ops the call replaces (the gradient call included)
    negate_scale: bool = False   # the call gets -s (for ``t - s * g``)
    # the rowwise accumulator kept as [V, 1] (``keepdims=True``): the call reads and writes it
    # as the [V] it is laid out like, through reshapes around the call
    slot_as_column: bool = False
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)  # the call's attributes


def _only_user(v: Value, opcode: str, where: str) -> Operation:
    users = v.owner.users
    if len(users) != 1 or users[0].opcode != opcode:
        found = ", ".join(f"{u.opcode} {u.name}" for u in users) or "nothing"
        raise NoMatch(f"{where} feeds {found}, not one {opcode}")
    return users[0]


def _other(op: Operation, v: Value) -> Value:
    a, b = op.operands
    return b if a is v else a


def _scalar(v: Value, where: str) -> Value:
    """The f32[] value a splat ``broadcast(s)`` spreads."""
    op = v.owner
    if (op.opcode == "broadcast" and op.operands and op.operands[0].type.rank == 0
            and op.operands[0].type.element_type == "f32"):
        return op.operands[0]
    raise NoMatch(f"{where} is {op.opcode} {op.name}, not a broadcast f32 scalar")


def _is_zero(v: Value) -> bool:
    c = scalar_constant(Ref(v))
    return c is not None and c == 0.0


#: Ops LLVM looks through when it contracts a multiply with the add or subtract it feeds.
_CONTRACTION_TRANSPARENT = ("negate", "bitcast", "reshape", "copy")


def _product(v: Value) -> Operation | None:
    """The multiply ``v`` is (possibly negated or reshaped), or None."""
    op = v.owner
    while op.opcode in _CONTRACTION_TRANSPARENT and op.operands:
        op = op.operands[0].owner
    return op if op.opcode == "multiply" else None


def _table(v: Value, like: Value, where: str) -> Value:
    if v.type.dims != like.type.dims or v.type.element_type != "f32":
        raise NoMatch(f"{where} {v.owner.name} {v.type} is not an f32 table of the gradient's "
                      "shape")
    if (mul := _product(v)) is not None:
        # Keras' momentum (m * 0.9 - g * lr), weight decay (t * (1 - wd) - g * lr): XLA:CPU
        # may contract either product with the add into one FMA; the kernel rounds this one
        raise NoMatch(f"{where} is the product {mul.name} (momentum, decay): XLA:CPU may fuse "
                      "it with the update's add into one FMA, which the kernel does not "
                      "reproduce")
    return v


def match_sgd(gcall: Operation) -> FusedUpdate:
    g = gcall.result
    mul = _only_user(g, "multiply", "the gradient")
    s = _scalar(_other(mul, g), "the learning-rate factor")
    if len(mul.users) != 1 or mul.users[0].opcode not in ("add", "subtract"):
        raise NoMatch(f"g * lr {mul.name} does not feed one add or subtract")
    upd = mul.users[0]
    if upd.opcode == "add":
        table, negate = _table(_other(upd, mul.result), g, "the updated value"), False
    elif upd.operands[1] is mul.result and upd.operands[0] is not mul.result:
        table, negate = _table(upd.operands[0], g, "the updated value"), True
    else:
        raise NoMatch(f"{upd.name} subtracts the table from the scaled gradient")
    idx, rows, *extra = gcall.operands
    return FusedUpdate(SPARSE_SGD, "sgd", [table, idx, rows, s, *extra], [upd.result],
                       [upd, mul, gcall], negate)


def _square_and_scaled(g: Value) -> tuple[Operation, Operation]:
    """The gradient's two users of the Adagrad forms: ``g * g`` and one other multiply."""
    users = g.owner.users
    sq = next((u for u in users if u.opcode == "multiply"
               and u.operands[0] is g and u.operands[1] is g), None)
    scaled = [u for u in users if u is not sq]
    if sq is None or len(scaled) != 1 or scaled[0].opcode != "multiply":
        raise NoMatch("the gradient does not feed g * g and one other multiply")
    return sq, scaled[0]


def match_adagrad(gcall: Operation) -> FusedUpdate:
    """optax.adagrad: a = g*g + a0; u = where(a > 0, rsqrt(a + eps), 0) * g; t + u * (-lr)."""
    g = gcall.result
    sq, u = _square_and_scaled(g)
    acc = _only_user(sq.result, "add", "g * g")
    accum = _table(_other(acc, sq.result), g, "the accumulator")
    gt = next((x for x in acc.users if x.opcode == "compare"), None)
    if (gt is None or gt.attributes.get("comparison_direction") != "GT"
            or gt.operands[0] is not acc.result or not _is_zero(gt.operands[1])):
        raise NoMatch("the accumulator is not compared > 0")
    plus = next((x for x in acc.users if x.opcode == "add"), None)
    eps: Value | None = None  # eps = 0: JAX drops the add of a literal zero
    if plus is not None:
        eps = _scalar(_other(plus, acc.result), "eps")
        rs = _only_user(plus.result, "rsqrt", "a + eps")
    else:
        rs = next((x for x in acc.users if x.opcode == "rsqrt"), None)
        if rs is None:
            raise NoMatch("the accumulator is not offset by eps under an rsqrt")
    sel = _only_user(rs.result, "select", "rsqrt(a + eps)")
    if (sel.operands[0] is not gt.result or sel.operands[1] is not rs.result
            or not _is_zero(sel.operands[2])
            or math.copysign(1.0, scalar_constant(Ref(sel.operands[2])) or 0.0) < 0):
        raise NoMatch(f"{sel.name} is not where(a > 0, rsqrt(a + eps), 0)")
    if _only_user(gt.result, "select", "a > 0") is not sel or _other(u, g) is not sel.result:
        raise NoMatch("the gradient is not scaled by where(a > 0, rsqrt(a + eps), 0)")
    v = _only_user(u.result, "multiply", "the scaled gradient")
    s = _scalar(_other(v, u.result), "the learning-rate factor")
    upd = _only_user(v.result, "add", "the scaled update")
    table = _table(_other(upd, v.result), g, "the updated value")
    idx, rows, *extra = gcall.operands
    owned = [upd, v, u, sel, rs] + ([plus] if plus is not None else []) + [gt, acc, sq, gcall]
    return FusedUpdate(SPARSE_ADAGRAD, "adagrad", [table, accum, idx, rows, s, eps, *extra],
                       [upd.result, acc.result], owned)


def match_keras_adagrad(gcall: Operation) -> FusedUpdate:
    """Keras 3's Adagrad (JAX backend): a = a0 + g * g; t - (lr * g) / sqrt(a + eps), lr a
    variable (XLA:CPU makes the divide a multiply by its own rsqrt)."""
    g = gcall.result
    sq, lg = _square_and_scaled(g)
    lr = _scalar(_other(lg, g), "the learning rate")
    if scalar_constant(Ref(lr)) is not None:
        # XLA's simplifier moves a constant factor past the rsqrt: another order of products
        raise NoMatch("the learning rate is a constant, which XLA:CPU multiplies in another "
                      "order")
    acc = _only_user(sq.result, "add", "g * g")
    accum = _table(_other(acc, sq.result), g, "the accumulator")
    root = gcall.parent.root
    plus = [u for u in acc.users if u is not root]
    if len(plus) != 1 or plus[0].opcode != "add":
        raise NoMatch("the new accumulator does not feed one add of eps (and the outputs)")
    plus = plus[0]
    eps = _scalar(_other(plus, acc.result), "eps")
    rt = _only_user(plus.result, "sqrt", "a + eps")
    div = _only_user(rt.result, "divide", "sqrt(a + eps)")
    if div.operands[0] is not lg.result or div.operands[1] is not rt.result:
        raise NoMatch(f"{div.name} is not (lr * g) / sqrt(a + eps)")
    upd = _only_user(div.result, "subtract", "(lr * g) / sqrt(a + eps)")
    if upd.operands[1] is not div.result or upd.operands[0] is div.result:
        raise NoMatch(f"{upd.name} does not subtract the update from the table")
    table = _table(upd.operands[0], g, "the updated value")
    idx, rows, *extra = gcall.operands
    return FusedUpdate(SPARSE_ADAGRAD_KERAS, "adagrad_keras",
                       [table, accum, idx, rows, lr, eps, *extra], [upd.result, acc.result],
                       [upd, div, rt, plus, acc, sq, lg, gcall])


def match_rowwise_adagrad(gcall: Operation) -> FusedUpdate:
    """Rowwise Adagrad as written by hand (FBGEMM's EXACT_ROWWISE_ADAGRAD):
    ``a = a0 + mean(g * g, axis=1); t - lr * g / (sqrt(a)[:, None] + eps)``, or as an optax
    transformation's update added to the table, ``t + (-lr) * g / (sqrt(a)[:, None] + eps)``."""
    g = gcall.result
    v_rows, d = g.type.dims
    sq, lg = _square_and_scaled(g)
    lr = _scalar(_other(lg, g), "the learning rate")
    red = _only_user(sq.result, "reduce", "g * g")
    if (red.attributes.get("dimensions") != [1] or binary_combiner(red) != "add"
            or not _is_zero(red.operands[1])
            or math.copysign(1.0, scalar_constant(Ref(red.operands[1])) or 0.0) < 0):
        raise NoMatch(f"{red.name} is not a sum of g * g over D from +0")
    summed, kept = row_user(red.result, v_rows)  # keepdims=True: reshaped to [V, 1]
    mean = _only_user(summed, "divide", "sum(g * g)")
    if mean.operands[0] is not summed or scalar_constant(Ref(mean.operands[1])) != d:
        raise NoMatch(f"{mean.name} does not divide the sum of squares by D = {d}")
    acc = _only_user(mean.result, "add", "mean(g * g)")
    accum = _other(acc, mean.result)
    if (accum.type.dims not in ((v_rows,), (v_rows, 1)) or accum.type.element_type != "f32"
            or acc.result.type.dims != accum.type.dims):
        raise NoMatch(f"the accumulator {accum.owner.name} {accum.type} is not f32[{v_rows}] "
                      f"or f32[{v_rows}, 1]")
    root = gcall.parent.root
    rs = [u for u in acc.users if u is not root]
    if len(rs) == 1 and rs[0].opcode == "add":
        raise NoMatch(f"the new accumulator feeds add {rs[0].name}, not one sqrt: eps inside "
                      "the square root (sqrt(a + eps)) is not the kernel's sqrt(a) + eps")
    if len(rs) != 1 or rs[0].opcode != "sqrt":
        raise NoMatch("the new accumulator does not feed one sqrt (and the outputs)")
    rt = rs[0]
    div = _only_user(lg.result, "divide", "lr * g")
    if div.operands[0] is not lg.result:
        raise NoMatch(f"{div.name} divides by lr * g")
    plus_out = row_value(div.operands[1], v_rows, "the denominator")
    plus = plus_out.owner
    if plus.opcode != "add":
        raise NoMatch(f"the denominator is {plus.opcode} {plus.name}, not sqrt(a) + eps")
    s_in = next((x for x in plus.operands if x.owner.opcode != "broadcast"
                 or x.owner.operands[0].type.rank != 0), None)
    if s_in is None:
        raise NoMatch(f"{plus.name} adds two scalars")
    eps = _scalar(_other(plus, s_in), "eps")
    if row_value(s_in, v_rows, "sqrt(a)") is not rt.result:
        raise NoMatch("the denominator is not sqrt(a) + eps of the new accumulator")
    users = div.users
    upd = users[0] if len(users) == 1 else None
    if upd is not None and upd.opcode == "subtract" and upd.operands[1] is div.result:
        table, negate = _table(upd.operands[0], g, "the updated value"), False
    elif upd is not None and upd.opcode == "add" and upd.operands[0] is not upd.operands[1]:
        # an optax-style transformation: u = -lr * g / (sqrt(a) + eps), then t + u (the kernel
        # gets lr = -s: t + (s * g) * r is t - ((-s) * g) * r bit for bit)
        table, negate = _table(_other(upd, div.result), g, "the updated value"), True
    else:
        found = ", ".join(f"{u.opcode} {u.name}" for u in users) or "nothing"
        raise NoMatch(f"lr * g / (sqrt(a) + eps) feeds {found}, not t - it or t + it")
    idx, rows, *extra = gcall.operands
    chain = row_chain(div.operands[1], plus_out) + [plus] + row_chain(s_in, rt.result)
    owned = [upd, div, *chain, rt, acc, mean, *kept[::-1], red, sq, lg, gcall]
    # XLA folds a constant lr into the per-row reciprocal: t - g * (1 / (sqrt(a) + eps) * lr)
    folded = scalar_constant(Ref(lr)) is not None
    return FusedUpdate(SPARSE_ROWWISE_ADAGRAD, "rowwise_adagrad",
                       [table, accum, idx, rows, lr, eps, *extra], [upd.result, acc.result],
                       owned, negate, attrs={"lr_folded": folded},
                       slot_as_column=accum.type.rank == 2)


def _reference(module: Module, f: FusedUpdate, gcall: Operation, shapes: list[Shape],
               index: int) -> Graph:
    """The computation the fused call stands for (the dense ops, the gradient as a ``call``
    of the scatter's reference computation), kept beside it as ember calls keep theirs."""
    comp = Graph(module.unique_graph_name(f"ember.{f.target.kind}.{index}"))
    vmap: dict[int, Value] = {}
    roles = list(f.target.operand_roles) + ["source_rows", "mask"]
    for i, (v, role) in enumerate(zip(f.inputs, roles[:len(f.inputs)], strict=True)):
        p = comp.append(Operation("parameter", [], [shapes[i] if i < len(shapes) else v.type],
                                  {"parameter_number": i}, name=role))
        vmap[id(v)] = p.result
        if p.result.type != v.type:  # a [V, 1] slot passed as [V]
            col = comp.append(Operation("reshape", [p.result], [v.type], name=f"{role}.column"))
            vmap[id(v)] = col.result
    if f.negate_scale:  # the call's scale is -s; the dense ops use s
        scale = f.inputs[f.target.operand_roles.index("scale")]
        s = comp.append(Operation("negate", [vmap[id(scale)]], [scale.type], name="scale.neg"))
        vmap[id(scale)] = s.result
    owned = {id(o) for o in f.owned}

    def value(v: Value) -> Value:
        if id(v) in vmap:
            return vmap[id(v)]
        op = v.owner
        if op is gcall:
            new = Operation("call", [value(x) for x in op.operands], [v.type],
                            callees=[gcall.callees[0]], name="gradient")
        elif id(op) in owned or op.opcode in ("broadcast", "constant"):
            new = op.clone([value(x) for x in op.operands])
        else:
            raise NoMatch(f"the update reads {op.opcode} {op.name}, not one of its inputs")
        comp.append(new)
        vmap[id(v)] = new.result
        return new.result

    outs = [value(v) for v in f.replaced]
    for i, (v, shape) in enumerate(zip(outs, shapes, strict=True)):
        if v.type != shape:  # a [V, 1] slot returned as [V]
            outs[i] = comp.append(Operation("reshape", [v], [shape], name="slot.row")).result
    if len(outs) == 1:
        comp.root = outs[0].owner
    else:
        comp.root = comp.append(Operation("tuple", outs, [Shape.tuple_of(shapes)], name="out"))
    module.add(comp, before=gcall.parent)
    return comp


def non_f32_table(gcall: Operation) -> str | None:
    """Why the update of this gradient cannot be fused because its table is not f32 (a bf16
    or f16 gradient, or an f32 one converted to the table's type, as JAX transposes an
    ``astype(float32)`` of the table), or None."""
    g = gcall.result
    et = g.type.element_type
    users = g.owner.users
    converts = users and all(u.opcode == "convert" for u in users)
    if et == "f32" and converts:
        et = users[0].result.type.element_type
        how = f"the f32 gradient is converted to the {et} table's type before its update"
    elif et != "f32" and converts and users[0].result.type.element_type == "f32":
        how = (f"the {et} gradient (of a {et} copy of the table) is converted to f32 before "
               f"the update: XLA rounds each of its adds to {et}")
    else:
        how = f"the gradient and its table are {et}"
    if et == "f32":
        return None
    return (f"{how}: the fused updates (ember.sparse_sgd, ember.sparse_adagrad, "
            "ember.sparse_rowwise_adagrad) take f32 tables only, so the update stays in XLA "
            "and the gradient kernel replaces the scatter")


def summed_gradients(gcall: Operation) -> str | None:
    """Why the update of this gradient cannot be fused because the gradient is first added to
    the gradient of another lookup (one table looked up twice, gradients accumulated over
    micro-batches), or None."""
    users = gcall.result.owner.users
    if len(users) != 1 or users[0].opcode != "add":
        return None
    other = _other(users[0], gcall.result).owner
    if not (other.opcode == "custom-call"
            and other.attributes.get("custom_call_target") == SCATTER_GRAD.name):
        return None
    return (f"the gradient is added to the gradient {other.name} of another lookup of the "
            "table (the table looked up twice, or gradients accumulated over micro-batches): "
            "XLA adds the two dense gradients element by element, the fused kernels sum one "
            "row's updates in one sequence from +0, which rounds differently when both hit a "
            "row, so the update stays in XLA and each gradient kernel replaces its scatter")


def clipped_gradient(gcall: Operation) -> str | None:
    """Why the update of this gradient cannot be fused because the gradient is first clipped
    element by element to constant bounds (``optax.clip``, ``jnp.clip``), or None."""
    users = gcall.result.owner.users
    if len(users) != 1 or users[0].opcode not in ("maximum", "minimum", "clamp"):
        return None
    op = users[0]
    bounds = [v for v in op.operands if v is not gcall.result]
    if not bounds or any(scalar_constant(Ref(v)) is None for v in bounds):
        return None
    return (f"the gradient is clipped element by element ({op.opcode} {op.name}, optax.clip) "
            "before its update: a row without gradient would stay unchanged, but the fused "
            "kernels have no clipping step, so the update stays in XLA and the gradient "
            "kernel replaces the scatter")


#: ``judge(gradient call, optimizer, table donated)``: None to fuse, else the report's fields
#: of an update left unfused (the cost model's decision).
Judge = Callable[[Operation, str, bool], "dict[str, Any] | None"]


def fuse(module: Module, gcall: Operation, index: int, rw: PatternRewriter,
         adagrad_ok: bool | None, judge: Judge | None = None) -> dict[str, Any]:
    """Fuse the update consuming ``gcall``'s gradient if it is exact (and ``judge`` agrees);
    returns the report's ``optimizer`` fields."""
    if why := non_f32_table(gcall) or summed_gradients(gcall) or clipped_gradient(gcall):
        return {"optimizer": None, "optimizer_reason": why}
    reasons = []
    for matcher in (match_sgd, match_adagrad, match_keras_adagrad, match_rowwise_adagrad):
        try:
            f = matcher(gcall)
        except NoMatch as e:
            reasons.append(f"{matcher.__name__[6:]}: {e}")
            continue
        if f.optimizer in ("adagrad", "adagrad_keras") and not adagrad_ok:
            return {"optimizer": None, "optimizer_reason": (
                "adagrad: the kernel's rsqrt does not reproduce XLA:CPU's on this machine, so "
                "the update stays in XLA")}
        if f.optimizer == "rowwise_adagrad":
            order, why = rowwise_sum_order(gcall)
            if order is None:
                return {"optimizer": None, "optimizer_reason": why}
            f.attrs["sum_order"] = order
        if judge is not None:
            kept = judge(gcall, f.optimizer, in_place(module, f.inputs[0]))
            if kept is not None:
                return kept
        return _replace(module, gcall, f, index, rw)
    return {"optimizer": None, "optimizer_reason": REFUSED + " (" + "; ".join(reasons) + ")"}


def in_place(module: Module, v: Value) -> bool:
    """Should the fused call's result alias operand ``v``? Not when ``v`` is an entry parameter
    the caller keeps: XLA would copy it into a new buffer first (one pass over the table),
    while an unaliased result lets the kernel write the new table in one pass itself."""
    op = v.owner
    while op.opcode in ("reshape", "bitcast"):  # stacked tables flattened: the same buffer
        op = op.operands[0].owner
    if op.opcode != "parameter" or op.parent is not module.entry:
        return True
    return int(op.attributes.get("parameter_number", 0)) in module.donated_parameters()


def _replace(module: Module, gcall: Operation, f: FusedUpdate, index: int,
             rw: PatternRewriter) -> dict[str, Any]:
    g: Graph = gcall.parent
    anchor = f.owned[0]
    scalar = Shape.array("f32", ())
    for i, v in enumerate(f.inputs):
        if v is None:  # a scalar the graph does not spell (eps = 0)
            zero = Operation("constant", [], [scalar],
                             {"literal": literal_from_numpy(np.zeros((), np.float32), scalar)},
                             name=g.unique_name("ember_zero"))
            rw.insert_before(anchor, zero)
            f.inputs[i] = zero.result
    inputs = list(f.inputs)
    shapes = [v.type for v in f.replaced]
    alias = [i for i in range(len(shapes)) if in_place(module, inputs[i])]
    if f.slot_as_column:  # the kernel reads and writes the [V, 1] slot as the [V] it is
        rows = Shape.array("f32", shapes[1].dims[:1])
        row = Operation("reshape", [inputs[1]], [rows], name=g.unique_name("ember_slot"))
        rw.insert_before(anchor, row)
        inputs[1], shapes[1] = row.result, rows
    comp = _reference(module, f, gcall, shapes, index)
    if f.negate_scale:
        at = f.target.operand_roles.index("scale")
        neg = Operation("negate", [inputs[at]], [inputs[at].type],
                        name=g.unique_name("ember_scale"))
        rw.insert_before(anchor, neg)
        inputs[at] = neg.result
    n = len(f.replaced)
    result = shapes[0] if n == 1 else Shape.tuple_of(shapes)
    alias = [{"output_shape_index": [] if n == 1 else [i], "operand_index": i,
              "operand_shape_index": []} for i in alias]
    cc = Operation("custom-call", inputs, [result], {
        "custom_call_target": f.target.name,
        "custom_call_api_version": "API_VERSION_TYPED_FFI",
        ATTRS_KEY: dict(f.attrs),
    }, [comp], name=g.unique_name(f"ember_{f.target.kind}"))
    if alias:
        cc.attributes["output_operand_aliasing"] = alias
    md = gcall.attributes.get("metadata")
    if md:
        cc.attributes["metadata"] = dict(md)
    rw.insert_before(anchor, cc)
    if n == 1:
        rw.replace_all_uses(f.replaced[0], cc.result)
    else:
        for i, old in enumerate(f.replaced):
            gte = Operation("get-tuple-element", [cc.result], [shapes[i]], {"tuple_index": i},
                            name=g.unique_name(f"ember_{f.target.kind}.{i}"))
            rw.insert_after(cc, gte)
            out = gte
            if shapes[i] != old.type:  # the [V, 1] slot back in its own shape
                out = Operation("reshape", [gte.result], [old.type],
                                name=g.unique_name(f"ember_{f.target.kind}.{i}.column"))
                rw.insert_after(gte, out)
            rw.replace_all_uses(old, out.result)
    for op in f.owned:
        if not op.users and op is not g.root:
            rw.erase(op)
    rw.sort_topologically(g)
    return {"optimizer": f.optimizer, "custom_call": cc.name,
            "outlined_computation": comp.name}


SLOT_SCATTER = ("a TF/Keras optimizer slot's scatter-add (Keras Adagrad's accumulator += g * g "
                "per contribution) rewritten in place; the table's own update is reported "
                "apart")


FOLDED_GRADIENT = ("the gradient is added to a dense value (optax momentum's g + 0.9 * m, "
                   "weight decay, a tied table's dense gradient), which XLA:CPU folds into "
                   "the scatter-add: rewritten as ember.ordered_scatter onto that value; the "
                   "dense update that follows stays in XLA")


def alias_sparse_apply(module: Module, cc: Operation) -> dict[str, Any]:
    """An ``ember.ordered_scatter`` (a TF/Keras sparse apply, or XLA's fold of
    ``A + scatter-add(0, ids, rows)``, whose reference computation ends in that add) updates
    its operand in place unless that is an entry parameter the caller keeps; its report
    fields: ``sgd`` for the table's scatter-subtract of ``lr * g`` (Keras/TF SGD), none for a
    slot's scatter-add or a fold."""
    if in_place(module, cc.operands[0]):
        cc.attributes["output_operand_aliasing"] = [
            {"output_shape_index": [], "operand_index": 0, "operand_shape_index": []}]
    if cc.callees and cc.callees[0].root.opcode == "add":
        return {"optimizer": None, "optimizer_reason": FOLDED_GRADIENT}
    if cc.attributes[ATTRS_KEY]["combiner"] == "subtract":
        return {"optimizer": "sgd"}
    return {"optimizer": None, "optimizer_reason": SLOT_SCATTER}


def fuse_optimizers(module: Module, rw: PatternRewriter, adagrad_ok: bool | None = None,
                    judge: Judge | None = None) -> dict[str, dict[str, Any]]:
    """Fuse every exact update ``judge`` (the cost model; None: every one) lets fuse, and alias
    every TF/Keras sparse apply with its variable; per gradient call name, its report
    fields."""
    out = {}
    calls = [op for op in module.entry.ops if op.opcode == "custom-call"
             and op.attributes.get("custom_call_target") == SCATTER_GRAD.name]
    if adagrad_ok is None and calls:
        from ember_xla.native.rsqrt_probe import rsqrt_matches_xla

        adagrad_ok = rsqrt_matches_xla()
    for i, gcall in enumerate(calls):
        out[gcall.name] = fuse(module, gcall, i, rw, adagrad_ok, judge)
    for op in module.entry.ops:
        if (op.opcode == "custom-call"
                and op.attributes.get("custom_call_target") == ORDERED_SCATTER.name):
            out[op.name] = alias_sparse_apply(module, op)
    return out
