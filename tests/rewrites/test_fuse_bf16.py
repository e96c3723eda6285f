"""bf16 embedding tables in training: optax SGD and a hand-written SGD on a bf16 table, with the
gradient's scatter-add in bf16 (the lookup in bf16) or in f32 (the table cast to f32 before
the lookup, as JAX transposes ``astype``: an f32 scatter-add, then a convert to bf16). The
gradient is rewritten (``ember.scatter_grad`` in the gradient's type) and the whole step stays
bit-identical to XLA's under both excess-precision settings; the update stays in XLA (the
fused update kernels take f32 tables only) and the report says so."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest
import training_steps as ts

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)


def bag_bf16(w):
    def loss(table, ids, y):  # bf16 lookup and bag sum, the head in f32
        return ts.mse(table[ids].sum(1).astype(jnp.float32), w, y)
    return loss


def bag_cast(w):
    def loss(table, ids, y):  # the table cast to f32 first: an f32 gradient, then bf16
        return ts.mse(table.astype(jnp.float32)[ids].sum(1), w, y)
    return loss


LOSSES = {"bf16": (bag_bf16, "the gradient and its table are bf16"),
          "cast": (bag_cast, "the f32 gradient is converted to the bf16 table's type")}


@pytest.mark.parametrize("ids_range", [(0, ts.V), (-2 * ts.V, 2 * ts.V)])
@pytest.mark.parametrize("optimizer", ["optax_sgd", "hand_sgd"])
@pytest.mark.parametrize("form", sorted(LOSSES))
def test_bf16_table_sgd_gradient_rewritten_update_refused(form, optimizer, ids_range):
    rng = np.random.default_rng(len(form) + len(optimizer))
    w, table = ts.head(rng), ts.table(rng, dtype=jnp.bfloat16)
    ids, y = ts.batch(rng, *ids_range)  # duplicates; out of range: clamped by table[ids]
    make, reason = LOSSES[form]
    if optimizer == "optax_sgd":
        opt = optax.sgd(0.1)
        r = ts.check_step(ts.optax_step(make(w), opt), table, opt.init(table), ids, y)
    else:
        r = ts.check_step(ts.sgd_step(make(w), 0.1), table, ids, y)
    (e,) = ts.backward(r)
    assert e["custom_call"].startswith("ember_scatter_grad")
    assert e["optimizer"] is None
    assert e["optimizer_reason"].startswith(reason)
    assert "take f32 tables only" in e["optimizer_reason"]


@pytest.mark.parametrize("optimizer", ["optax_sgd", "hand_sgd"])
def test_f32_master_table_bf16_lookup_update_refused(optimizer):
    # an f32 table looked up through a bf16 copy (mixed precision): a bf16 gradient, converted
    # to f32 before the f32 table's update; XLA rounds each of its adds to bf16
    rng = np.random.default_rng(41)
    w, table = ts.head(rng), ts.table(rng)

    def loss(table, ids, y):
        return ts.mse(table.astype(jnp.bfloat16)[ids].sum(1).astype(jnp.float32), w, y)

    ids, y = ts.batch(rng, -2 * ts.V, 2 * ts.V)
    if optimizer == "optax_sgd":
        opt = optax.sgd(0.1)
        r = ts.check_step(ts.optax_step(loss, opt), table, opt.init(table), ids, y)
    else:
        r = ts.check_step(ts.sgd_step(loss, 0.1), table, ids, y)
    (e,) = ts.backward(r)
    assert e["custom_call"].startswith("ember_scatter_grad") and e["optimizer"] is None
    assert e["optimizer_reason"].startswith("the bf16 gradient (of a bf16 copy of the table)")
