"""Edge cases of whole training steps with the backward rewritten and the update fused, not
covered by test_fuse_optimizer.py / patterns/test_scatter_grad.py / the corpus: out-of-range
ids in clip mode under a fused SGD, a segment bag with empty bags and out-of-range segment ids
under a fused SGD (the gathered gradient form with its mask), a zero learning rate for a fused
Adagrad, denormals in the table and the slots (XLA:CPU's dense update flushes them to the zero
of their sign in every row, rows no id touches too; rowwise Adagrad's in test_fuse_rowwise.py),
a masked bag in a training step (its broadcast mask shared with the backward: a forward
cluster too), and one table looked up by two bags whose rows overlap (the two gradients are
summed before the update, so the update stays in XLA with its reason). Every step
bit-identical to XLA's with excess precision allowed and not (training_steps.check_step)."""

from __future__ import annotations

import ctypes

import jax
import numpy as np
import optax
import pytest
import training_steps as ts

from ember_xla.native import load_library
from ember_xla.native.rsqrt_probe import rsqrt_matches_xla

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)


def optimizers(r):
    return [c.get("optimizer") for c in ts.backward(r)]


def test_clip_mode_out_of_range_ids_fused_sgd():
    rng = np.random.default_rng(21)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng, -80, 80)                     # below 0 and past V: clamped
    opt = optax.sgd(0.1)
    r = ts.check_step(ts.optax_step(ts.bag_take(w, "clip"), opt), t, opt.init(t), ids, y)
    assert optimizers(r) == ["sgd"]


def test_segment_bag_empty_and_out_of_range_segments_fused_sgd():
    rng = np.random.default_rng(22)
    w, t = ts.head(rng), ts.table(rng)
    ids = rng.integers(0, 6, 50).astype(np.int32)       # duplicates across bags
    seg = np.sort(rng.integers(0, ts.B + 4, 50)).astype(np.int32)
    seg[:3] = -1                                        # dropped by segment_sum
    seg[seg == 2] = 3                                   # bag 2 empty
    y = rng.standard_normal(ts.B).astype(np.float32)
    r = ts.check_step(ts.sgd_step(ts.bag_segments(w, ts.B), 0.2), t, ids, seg, y)
    assert optimizers(r) == ["sgd"]
    (e,) = ts.backward(r)
    assert "mask" in e["inputs"]                        # the gathered form, bounds mask kept


@pytest.mark.skipif(not rsqrt_matches_xla(), reason="the kernel's rsqrt is not XLA:CPU's on "
                    "this CPU, so Adagrad is not fused here")
def test_zero_learning_rate_fused_adagrad():
    rng = np.random.default_rng(23)
    w, t = ts.head(rng), ts.table(rng)
    t[ts.V - 1] = -0.0                                  # an untouched -0 row
    ids, y = ts.batch(rng, 0, 8)
    opt = optax.adagrad(0.0)
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, opt.init(t), ids, y)
    assert optimizers(r) == ["adagrad"]


def _with_denormals(x: np.ndarray) -> np.ndarray:
    """``x`` with a denormal of either sign in the first column of every row."""
    x = np.array(x, np.float32)
    x[::2, 0], x[1::2, 0] = np.float32(-1e-39), np.float32(3e-40)
    return x


@pytest.mark.parametrize("name", ["sgd", "adagrad"])
def test_denormals_flushed_in_untouched_rows_as_xla_flushes_them(name):
    if name != "sgd" and not ts.fused_here(f"sparse_{name}"):
        pytest.skip(f"sparse_{name} is not fused on this CPU (its rsqrt or mean order is not "
                    "XLA:CPU's), so there is no call to test")
    rng = np.random.default_rng(25)
    w, t = ts.head(rng), _with_denormals(ts.table(rng))
    ids, y = ts.batch(rng, 0, 8)                        # rows 8.. untouched
    opt = optax.sgd(0.1) if name == "sgd" else optax.adagrad(0.1)
    state = opt.init(t)
    if name == "adagrad":                               # denormal accumulators too
        state = jax.tree.map(lambda a: _with_denormals(a) if np.ndim(a) == 2 else a, state)
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, state, ids, y)
    assert optimizers(r) == [name]


@pytest.mark.parametrize("name", ["sgd", "adagrad"])
def test_a_pooled_fused_update_computes_xlas_bits(name):
    """Above sparse_update.h's kSerialFloats of work (checked through the library) the fused
    call runs on the pool (row groups and untouched-row ranges split between threads); below it
    on the calling thread, as the small tables of this file do. Denormal rows included."""
    if name != "sgd" and not ts.fused_here(f"sparse_{name}"):
        pytest.skip(f"sparse_{name} is not fused on this CPU, so there is no call to test")
    lib = load_library()
    lib.EmberSparseUpdateSerialFloats.restype = ctypes.c_int64
    lib.EmberPoolThreads.restype = ctypes.c_int64
    if lib.EmberPoolThreads() < 2:
        pytest.skip("one pool thread: every fused update runs on the calling thread here")
    rng = np.random.default_rng(27)
    v, d = 6000, 32                                     # 192k floats of table alone
    assert v * d > lib.EmberSparseUpdateSerialFloats()  # so the call takes the pool
    w, t = ts.head(rng, d), _with_denormals(ts.table(rng, v=v, d=d))
    ids, y = ts.batch(rng, 0, v // 2, b=512, p=8)      # rows v/2.. untouched
    opt = optax.sgd(0.1) if name == "sgd" else optax.adagrad(0.1)
    r = ts.check_step(ts.optax_step(ts.bag_take(w), opt), t, opt.init(t), ids, y)
    assert optimizers(r) == [name]


@pytest.mark.parametrize("form", ["where", "mask_zero"])
def test_masked_bag_in_a_training_step_is_a_forward_cluster(form):
    """The backward selects the gradient rows with the forward's broadcast mask, so the bag's
    select shares it (split-shared-lookup gives the bag its own copy): forward and backward
    are both clusters, the update fused."""
    rng = np.random.default_rng(26)
    w, t = ts.head(rng, 16), ts.table(rng, d=16)
    ids, y = ts.batch(rng, -4, ts.V + 4, p=8)         # a padded bag (D = 8 became segments)
    ids[:, -1] = 0                                      # padding (mask_zero)
    mask = rng.random(ids.shape) < 0.7

    def bag(table, ids, keep):
        return jax.numpy.where(keep[..., None], table[ids], 0).sum(1)

    if form == "where":
        r = ts.check_step(ts.sgd_step(lambda t, i, m, y: ts.mse(bag(t, i, m), w, y), 0.1),
                          t, ids, mask, y)
    else:
        r = ts.check_step(ts.sgd_step(lambda t, i, y: ts.mse(bag(t, i, i != 0), w, y), 0.1),
                          t, ids, y)
    assert sorted(c["pass"] for c in r.clusters) == ["backward", "forward"], r.near_misses
    assert optimizers(r) == ["sgd"]


def test_one_table_two_overlapping_bags_keeps_the_summed_update_in_xla():
    rng = np.random.default_rng(24)
    w, t = ts.head(rng), ts.table(rng)
    (a, y), (b, _) = ts.batch(rng, 0, 9), ts.batch(rng, 5, 14)   # rows 5..8 in both

    def loss(table, a, b, y):
        return ts.mse(table[a].sum(1) + table[b].sum(1), w, y)

    def step(table, a, b, y):
        value, g = jax.value_and_grad(loss)(table, a, b, y)
        return value, table - 0.1 * g

    r = ts.check_step(step, t, a, b, y)
    assert optimizers(r) == [None, None]
    assert all("of another lookup of the table" in e["optimizer_reason"]
               and "stays in XLA" in e["optimizer_reason"] for e in ts.backward(r))


def test_fill_mode_zero_fill_training_step():
    # jnp.take(mode="fill", fill_value=0): the lookup's ids also feed one-operand ops, which
    # the search for the forward gather of the gradient's ids once indexed as gathers
    rng = np.random.default_rng(25)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng, -70, 70)                     # fill: out-of-range rows are 0

    def loss(table, ids, y):
        return ts.mse(jax.numpy.take(table, ids, axis=0, mode="fill", fill_value=0).sum(1),
                      w, y)

    r = ts.check_step(ts.sgd_step(loss, 0.1), t, ids, y, cost_model=False)
    assert optimizers(r) == ["sgd"]


def test_time_major_scan_over_the_lookup_gradient_fused_sgd():
    # an RNN over embedded tokens (flax nn.RNN, a hand-written scan) swaps the looked-up rows
    # to [T, B, D]; lookup-layout moves that transpose onto the forward gather's ids, and the
    # gradient's scatter-add, at the ids in their own order, is still that lookup's transpose
    rng = np.random.default_rng(26)
    w, t = ts.head(rng), ts.table(rng)
    ids, y = ts.batch(rng, 0, ts.V)
    cell = (rng.standard_normal((ts.D, ts.D)) * 0.3).astype(np.float32)

    def loss(table, ids, y):
        xs = jax.numpy.swapaxes(table[ids], 0, 1)               # [P, B, D]
        h, _ = jax.lax.scan(lambda h, x: (jax.numpy.tanh(h @ cell + x), None),
                            jax.numpy.zeros((ts.B, ts.D), np.float32), xs)
        return ts.mse(h, w, y)

    r = ts.check_step(ts.sgd_step(loss, 0.1), t, ids, y, cost_model=False)
    assert optimizers(r) == ["sgd"]


def test_time_major_tied_table_folded_gradient_is_backward():
    # the tied table's dense gradient (from the logits) plus the time-major lookup's
    # scatter-add, folded by XLA into one scatter: an ember.ordered_scatter of the backward
    rng = np.random.default_rng(27)
    t = ts.table(rng)
    ids, _ = ts.batch(rng, 0, ts.V)
    labels = rng.integers(0, ts.V, (ts.P, ts.B)).astype(np.int32)

    def loss(table, ids, labels):
        xs = jax.numpy.swapaxes(table[ids], 0, 1)               # [P, B, D]
        logits = jax.numpy.tanh(xs) @ table.T                  # tied output embedding
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    r = ts.check_step(ts.sgd_step(loss, 0.1), t, ids, labels, cost_model=False)
    assert [(c["pattern"], c["pass"]) for c in r.clusters] == [
        ("ember.ordered_scatter", "backward")]
