"""Rowwise Adagrad (FBGEMM's EXACT_ROWWISE_ADAGRAD written by hand in JAX, or as an optax
transformation whose update ``optax.apply_updates`` adds) fused into the lookup's gradient as
``ember.sparse_rowwise_adagrad``: whole steps bit-identical to XLA's under
both excess-precision settings (loss, table, per-row accumulator), untouched rows that the
dense update would change (denormals included) updated as XLA does, and the update left in
XLA, with the reason, where the kernel's row-wise mean of squares is not XLA:CPU's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import training_steps as ts

from ember_xla.native.row_mean_order import OrderNotReproduced, row_mean_order

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

# large enough for XLA:CPU to hand the reduce to YNNPACK (>= 4096 elements)
V, D = 300, 16


def rowwise_update(table, accum, g, lr, eps):
    """The update with the accumulator kept as [V] (``accum[:, None]`` spreads it) or as
    [V, 1] (``keepdims=True``: it broadcasts over the row by itself)."""
    if accum.ndim == 2:
        accum = accum + jnp.mean(g * g, axis=1, keepdims=True)
        return table - lr * g / (jnp.sqrt(accum) + eps), accum
    accum = accum + jnp.mean(g * g, axis=1)
    return table - lr * g / (jnp.sqrt(accum)[:, None] + eps), accum


def rowwise_step(loss, lr=0.05, eps=1e-8):
    def step(table, accum, *batch):
        value, g = jax.value_and_grad(loss)(table, *batch)
        return value, *rowwise_update(table, accum, g, lr, eps)
    return step


def rowwise_step_lr_arg(loss):
    def step(table, accum, lr, eps, *batch):
        value, g = jax.value_and_grad(loss)(table, *batch)
        return value, *rowwise_update(table, accum, g, lr, eps)
    return step


def optax_rowwise_lr_arg(loss):
    import optax

    def step(table, accum, lr, eps, *batch):
        value, g = jax.value_and_grad(loss)(table, *batch)
        updates, accum = ts.optax_rowwise_adagrad(lr, eps).update(g, accum)
        return value, optax.apply_updates(table, updates), accum
    return step


def setup(seed, v=V, d=D, lo=0, hi=40, column=False):
    """``column``: the accumulator kept as [V, 1] (``keepdims=True``)."""
    rng = np.random.default_rng(seed)
    w, t = ts.head(rng, d), ts.table(rng, v, d)
    t[v - 1] = -0.0  # an untouched -0 row
    accum = rng.uniform(0, 2, (v, 1) if column else v).astype(np.float32)
    ids, y = ts.batch(rng, lo, hi)
    return w, t, accum, ids, y


def fused(r):
    return [c.get("optimizer") for c in ts.backward(r)]


def _reproduced(v: int, d: int) -> bool:
    try:
        return bool(row_mean_order(v, d))
    except OrderNotReproduced:
        return False


needs_order = pytest.mark.skipif(not _reproduced(V, D), reason=(
    "the kernel's row-wise mean of squares is not XLA:CPU's on this CPU (see the refusal test)"))


@needs_order
@pytest.mark.parametrize("column", [False, True])
@pytest.mark.parametrize("lo,hi", [(0, 40), (-400, 400)])
@pytest.mark.parametrize("kind", ["take", "index"])
def test_hand_written_rowwise_adagrad(lo, hi, kind, column):
    w, t, accum, ids, y = setup(1, lo=lo, hi=hi, column=column)
    loss = ts.bag_take(w) if kind == "take" else ts.bag_index(w)
    r = ts.check_step(rowwise_step(loss), t, accum, ids, y)
    assert fused(r) == ["rowwise_adagrad"]
    (e,) = ts.backward(r)
    assert e["custom_call"].startswith("ember_sparse_rowwise_adagrad")


@needs_order
def test_denormals_flushed_in_untouched_rows_as_xla_flushes_them():
    """XLA:CPU's dense update reads a denormal as the zero of its sign (DAZ), in the rows no id
    touches too; the kernel updates such rows as XLA does."""
    w, t, accum, ids, y = setup(3)
    t[::2, 0], t[1::2, 0] = np.float32(-1e-39), np.float32(3e-40)
    accum[::3] = np.float32(1e-39)
    r = ts.check_step(rowwise_step(ts.bag_take(w)), t, accum, ids, y)
    assert fused(r) == ["rowwise_adagrad"]


@needs_order
@pytest.mark.parametrize("lo,hi", [(0, 40), (-400, 400)])
def test_optax_transformation_form(lo, hi):
    w, t, accum, ids, y = setup(7, lo=lo, hi=hi)
    opt = ts.optax_rowwise_adagrad(0.05)
    r = ts.check_step(ts.optax_step(ts.bag_index(w), opt), t, accum, ids, y)
    assert fused(r) == ["rowwise_adagrad"]


@needs_order
@pytest.mark.parametrize("form", ["hand_written", "optax", "hand_written_column"])
@pytest.mark.parametrize("lr,eps", [(0.05, 1e-8), (0.0, 1e-8), (-0.05, 1e-8), (0.05, 0.0),
                                    (np.inf, 1e-8), (np.nan, 1e-8), (0.05, -1.0)])
def test_runtime_lr_and_eps_untouched_rows_as_xla(lr, eps, form):
    # lr < 0, inf, NaN; eps = 0 with a zero accumulator (0 / 0); eps < 0: the dense update
    # changes rows without gradient, and the kernel changes them the same way (the optax form
    # adds (-lr) * g / den: the kernel gets lr back; the column form keeps a [V, 1] slot)
    w, t, accum, ids, y = setup(2, column=form.endswith("column"))
    accum[V - 3:] = np.array([0.0, -0.0, np.nan]).reshape(accum[V - 3:].shape)
    accum[V - 6:V - 3] = np.array([0.25, 1.0, np.inf]).reshape(accum[V - 3:].shape)
    make = optax_rowwise_lr_arg if form == "optax" else rowwise_step_lr_arg
    r = ts.check_step(make(ts.bag_index(w)), t, accum, np.float32(lr), np.float32(eps), ids, y)
    assert fused(r) == ["rowwise_adagrad"]


@pytest.mark.parametrize("v,d", [(256, 32), (128, 64), (64, 128), (512, 16), (64, 256),
                                 (2048, 2)])
def test_widths(v, d):
    # every class native/row_mean_order.py reproduces for D > 1, as a whole step: YNNPACK
    # sizes (>= 4096 elements) with D = 16 .. 256 (blocked16) and D = 2
    if not _reproduced(v, d):
        pytest.skip(f"[{v}, {d}]: not reproduced on this CPU (native/row_mean_order.py)")
    w, t, accum, ids, y = setup(3, v=v, d=d)
    r = ts.check_step(rowwise_step(ts.bag_index(w)), t, accum, ids, y)
    assert fused(r) == ["rowwise_adagrad"]


@pytest.mark.parametrize("v", [60, 5000])
def test_one_column_tables_stay_in_xla(v):
    w, t, accum, ids, y = setup(4, v=v, d=1)
    r = ts.check_step(rowwise_step(ts.bag_index(w)), t, accum, ids, y)
    (e,) = ts.backward(r)
    assert e["optimizer"] is None and "[V, 1] table" in e["optimizer_reason"]


def test_small_or_unreproduced_shapes_stay_in_xla():
    # [60, 8]: below YNNPACK's size XLA's own loop, vectorized across rows by LLVM, sums some
    # rows in one order and the others in another
    w, t, accum, ids, y = setup(4, v=60, d=8)
    r = ts.check_step(rowwise_step(ts.bag_index(w)), t, accum, ids, y)
    (e,) = ts.backward(r)
    assert e["optimizer"] is None and "row-wise mean" in e["optimizer_reason"]
    assert e["custom_call"].startswith("ember_scatter_grad")


@pytest.mark.parametrize("v,d", [(300, 48), (300, 192)])
def test_ynnpack_widths_not_reproduced_stay_in_xla(v, d):
    # YNNPACK sums rows of these widths in an order the kernel does not reproduce: the step is
    # still bit-identical (the gradient rewritten, the update in XLA) and the report says why
    w, t, accum, ids, y = setup(6, v=v, d=d)
    r = ts.check_step(rowwise_step(ts.bag_index(w)), t, accum, ids, y)
    (e,) = ts.backward(r)
    assert e["optimizer"] is None and e["custom_call"].startswith("ember_scatter_grad")
    assert "rowwise_adagrad: the row-wise mean of g * g over" in e["optimizer_reason"]


@needs_order
@pytest.mark.parametrize("donate", [(), (0, 1)])
def test_column_accumulator_in_place_or_kept(donate):
    # the [V, 1] slot goes to the kernel as [V] through reshapes (the same bytes): aliased
    # with the call's result when donated, a separate result when the caller keeps it
    w, t, accum, ids, y = setup(8, column=True)
    step = jax.jit(rowwise_step(ts.bag_index(w)), donate_argnums=donate)
    proto = step.lower(t, accum, ids, y).compiler_ir("hlo").as_serialized_hlo_module_proto()
    from ember_xla.hlo_import.proto import module_from_proto
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    m = module_from_proto(proto, "column")
    r = rewrite_module(m)
    (e,) = ts.backward(r)
    assert e["optimizer"] == "rowwise_adagrad"
    (cc,) = [op for op in r.module.entry.ops if op.name == e["custom_call"]]
    assert cc.operands[1].type.dims == (V,) and cc.operands[1].owner.opcode == "reshape"
    aliased = {a["operand_index"] for a in cc.attributes.get("output_operand_aliasing", [])}
    assert aliased == ({0, 1} if donate else set())
    for opts in ts.OPTIONS:
        args = [t, accum, ids, y]
        want, got = run_module(m, args, opts), run_module(r.module, args, opts)
        assert all(ts.same_bits(a, b) for a, b in zip(want, got, strict=True)), opts


@needs_order
@pytest.mark.parametrize("column", [False, True])
def test_eps_inside_the_square_root_stays_in_xla(column):
    # sqrt(a + eps) is not the kernel's sqrt(a) + eps: the update stays in XLA and says why
    w, t, accum, ids, y = setup(9, column=column)

    def step(table, accum, ids, y):
        value, g = jax.value_and_grad(ts.bag_index(w))(table, ids, y)
        if column:
            accum = accum + jnp.mean(g * g, axis=1, keepdims=True)
            return value, table - 0.05 * g / jnp.sqrt(accum + 1e-8), accum
        accum = accum + jnp.mean(g * g, axis=1)
        return value, table - 0.05 * g / jnp.sqrt(accum + 1e-8)[:, None], accum

    r = ts.check_step(step, t, accum, ids, y)
    (e,) = ts.backward(r)
    assert e["optimizer"] is None and "sqrt(a + eps)" in e["optimizer_reason"]
    assert e["custom_call"].startswith("ember_scatter_grad")


def test_other_spellings_are_not_taken_for_rowwise():
    # lr * (g / den) rounds differently: not the matched form, the update stays in XLA
    w, t, accum, ids, y = setup(5)

    def step(table, accum, ids, y):
        value, g = jax.value_and_grad(ts.bag_index(w))(table, ids, y)
        accum = accum + jnp.mean(g * g, axis=1)
        return value, table - 0.05 * (g / (jnp.sqrt(accum)[:, None] + 1e-8)), accum

    r = ts.check_step(step, t, accum, ids, y)
    (e,) = ts.backward(r)
    assert e["optimizer"] is None
