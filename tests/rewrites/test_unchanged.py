"""Graphs with nothing to rewrite come out unchanged (byte-identical), and near-misses carry
their reason."""

from __future__ import annotations

import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.hlo_import.proto import module_to_proto
from ember_xla.rewrites.patterns import ALL_PATTERNS, SegmentSumOfRows
from ember_xla.rewrites.pipeline import rewrite_module

#: the patterns of looked-up rows (not the segment sum of any computed rows)
LOOKUP_PATTERNS = [p for p in ALL_PATTERNS if not isinstance(p, SegmentSumOfRows)]


def test_dense_model_is_left_alone():
    import jax.numpy as jnp

    def mlp(x, w1, w2):
        return jnp.tanh(x @ w1) @ w2 + jnp.sort(x, axis=1)[:, :1]

    args = [np.ones((4, 8), np.float32), np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)]
    m = from_jax(mlp, *args).module
    before = module_to_proto(m)
    r = rewrite_module(m)
    assert not r.clusters and r.module is m
    assert module_to_proto(r.module) == before


def test_gather_without_reduction_is_left_alone():
    import jax.numpy as jnp

    m = from_jax(lambda t, i: jnp.take(t, i, axis=0) * 2.0, np.ones((10, 4), np.float32),
                 np.zeros(3, np.int32)).module
    before = module_to_proto(m)
    r = rewrite_module(m)
    assert not r.clusters and module_to_proto(r.module) == before


def test_converted_rows_are_a_near_miss():
    import jax
    import jax.numpy as jnp

    def f(t, i, s):
        rows = t[i].astype(jnp.float32)  # a bf16 lookup summed in f32 (and used elsewhere)
        return jax.ops.segment_sum(rows, s, num_segments=3), rows * 2.0

    m = from_jax(f, np.ones((10, 4), jnp.bfloat16), np.zeros(5, np.int32),
                 np.zeros(5, np.int32)).module
    before = module_to_proto(m)
    r = rewrite_module(m, LOOKUP_PATTERNS)
    assert not r.clusters
    assert [n["reason"] for n in r.near_misses] == [
        "the reduced values come from convert convert_element_type.1, not from a row gather"]
    assert module_to_proto(r.module) == before
    assert r.counters["ember.segment_reduce"]["failed"] >= 1
    # all patterns: the sum of the converted rows is a segment sum of computed rows
    assert [(c["kind"], c["pass"]) for c in rewrite_module(m).clusters] == [
        ("scatter_grad", "forward")]


def test_escaping_rows_leave_the_reduction_a_copy():
    """Rows also used outside a reduction (a GAT's logits read the gathered features its
    messages are made of): the reduction is rewritten on its own copy of the lookup, the
    original gather stays for the other user, the outputs are bit-equal."""
    import jax

    from ember_xla.runtime.execute import run_module

    def f(t, i, s):
        rows = t[i]
        return jax.ops.segment_sum(rows, s, num_segments=3), rows.sum()

    rng = np.random.default_rng(0)
    args = [rng.standard_normal((10, 4)).astype(np.float32),
            np.array([0, 9, -1, 12, 3], np.int32), np.array([0, 2, 2, 5, -1], np.int32)]
    m = from_jax(f, *args).module
    r = rewrite_module(m, cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["segment_reduce"]
    assert [op.opcode for op in r.module.entry.ops].count("gather") == 1
    for a, b in zip(run_module(r.module, args), run_module(m, args), strict=True):
        assert a.tobytes() == b.tobytes()


def test_shared_lookup_feeding_two_reductions_is_split():
    """One lookup feeding segment_sum and segment_max: canonicalization gives each reduction
    its own copy of the lookup (split-shared-lookup), so both become clusters."""
    import jax
    import jax.numpy as jnp

    from ember_xla.runtime.execute import run_module

    def f(t, i, s):
        rows = jnp.take(t, i, axis=0, mode="clip")
        return (jax.ops.segment_sum(rows, s, num_segments=3),
                jax.ops.segment_max(rows, s, num_segments=3))

    rng = np.random.default_rng(0)
    args = [rng.standard_normal((10, 4)).astype(np.float32),
            np.array([0, 9, -1, 12, 3], np.int32), np.array([0, 2, 2, 5, -1], np.int32)]
    m = from_jax(f, *args).module
    r = rewrite_module(m)
    assert len(r.clusters) == 2 and not r.near_misses
    for a, b in zip(run_module(r.module, args), run_module(m, args), strict=True):
        assert a.tobytes() == b.tobytes()


def test_a_rewritten_module_is_not_rewritten_again():
    """The reference bodies of the ember calls hold the original gathers: rewriting (or
    emulating) a rewritten module must find no cluster there, grouped or not."""
    import jax.numpy as jnp

    from ember_xla.call_specs import ember_calls

    def two_bags(a, b, ia, sa, ib, sb):
        ea = jnp.zeros((4, 8), a.dtype).at[sa].add(a[ia])
        eb = jnp.zeros((4, 8), b.dtype).at[sb].add(b[ib])
        return ea + eb

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, 40).astype(np.int32)
    seg = np.sort(rng.integers(0, 4, 40)).astype(np.int32)
    args = [rng.standard_normal((50, 8)).astype(np.float32),
            rng.standard_normal((60, 8)).astype(np.float32), ids, seg, ids, seg]
    m = from_jax(two_bags, *args).module
    for group in (True, False):
        once = rewrite_module(m, cost_model=False, group=group)
        assert once.clusters and ember_calls(once.module)
        before = module_to_proto(once.module)
        again = rewrite_module(once.module, cost_model=False, group=group)
        assert not again.clusters, group
        assert module_to_proto(again.module) == before


def test_dynamic_shape_cluster_stays_in_xla():
    """``tf.unique`` before a lookup gives rows of a bounded-dynamic shape (f32[<=L,D]): the
    ember calls take static shapes, so the bag stays in XLA with the reason and the module is
    unchanged (a custom-call there would not compile)."""
    import tensorflow as tf

    from ember_xla.hlo_import.tf_source import from_tf_function

    table = tf.constant(np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([3, 5], tf.int32)], jit_compile=True)
    def f(ids):
        u = tf.unique(tf.reshape(ids, [-1]))
        rows = tf.gather(tf.gather(table, u.y), u.idx)
        return tf.reduce_sum(tf.reshape(rows, [3, 5, 4]), 1)

    m = from_tf_function(f, np.zeros((3, 5), np.int32)).module
    before = module_to_proto(m)
    r = rewrite_module(m, cost_model=False)
    assert not r.clusters
    assert any("bounded-dynamic shape" in n["reason"] for n in r.near_misses), r.near_misses
    assert module_to_proto(r.module) == before


def test_per_bag_weights_near_miss_says_they_are_shared():
    """A weight per bag (``w[:, None, None]``, shared by the bag's lookups) is reported as
    such, not as if it were misshaped: XLA:CPU factors it out of the sum."""

    def f(t, ids, w):
        return (t[ids] * w[:, None, None]).sum(1)

    m = from_jax(f, np.ones((50, 8), np.float32), np.zeros((4, 6), np.int32),
                 np.ones(4, np.float32)).module
    r = rewrite_module(m, cost_model=False)
    assert not r.clusters
    assert any("shared by several lookups (as one weight per bag" in n["reason"]
               for n in r.near_misses), r.near_misses
