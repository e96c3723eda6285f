"""count-as-lookup: a segment sum of a broadcast constant (``jraph.segment_mean``'s count,
``segment_sum(ones_like(x))``) becomes the segment sum of a one-row table's lookup,
bit-identical on XLA:CPU under both excess-precision settings for in-range, negative and
out-of-range ids; the rewrite then computes it with ``ember.segment_reduce``, bit-equal with
the division that follows, in f32, bf16 and f16. Computed values broadcast along the row,
other combiners, non-zero starts and scatters whose columns differ are left alone."""

import numpy as np
import pytest

PIPE = "count-as-lookup"


def _ids(n, s, seed=0):
    ids = np.random.default_rng(seed).integers(0, s, n).astype(np.int32)
    edge = ids.copy()
    edge[:4] = [-1, s, 3 * s, -s]
    return ids, edge


def _scatters(work):
    return [op for op in work.entry.ops if op.opcode == "scatter"]


def _same_on_xla(original, work, inputs):
    from ember_xla.runtime.execute import run_module

    for excess in (True, False):
        opts = {"xla_allow_excess_precision": excess}
        for xs in inputs:
            for a, b in zip(run_module(work, xs, opts), run_module(original, xs, opts),
                            strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape
                assert a.tobytes() == b.tobytes(), (excess, a, b)


def _segment_mean(x, r):
    import jax
    import jax.numpy as jnp

    total = jax.ops.segment_sum(x, r, 7)
    count = jax.ops.segment_sum(jnp.ones_like(x), r, 7)
    return total / jnp.maximum(count, 1.0)


def _inputs(dtype, e=40, d=5):
    import jax.numpy as jnp

    ids, edge = _ids(e, 7)
    x = np.random.default_rng(1).standard_normal((e, d)).astype(np.float32)
    x = np.asarray(jnp.asarray(x, dtype))
    return [[x, ids], [x, edge]]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_segment_count_becomes_a_lookup_of_a_row_of_ones(canon, dtype):
    cases = _inputs(dtype)
    work, _ = canon(_segment_mean, cases[0], PIPE, inputs=cases[1:])
    count = [op for op in _scatters(work) if op.operands[2].owner.opcode == "gather"
             and op.operands[2].owner.operands[0].owner.opcode == "broadcast"]
    (sc,) = count
    table = sc.operands[2].owner.operands[0]
    assert tuple(table.type.dims) == (1, 5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_jraph_segment_mean_is_rewritten_bit_equal(dtype):
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    cases = _inputs(dtype, e=300, d=16)
    m = from_jax(_segment_mean, *cases[0]).module
    for excess in (True, False):
        r = rewrite_module(m, cost_model=False, excess_precision=excess)
        # the count a segment_reduce of the row of ones; the sum of x rows XLA computed
        assert sorted(c["kind"] for c in r.clusters) == ["scatter_grad", "segment_reduce"]
        _same_on_xla(m, r.module, cases)


def test_left_alone(canon):
    import jax
    import jax.numpy as jnp

    def f(x, g, r):
        by_column = jnp.broadcast_to(jnp.arange(4.0)[None], (x.shape[0], 4))
        return (jax.ops.segment_sum(by_column, r, 5),                  # differs per column
                jax.ops.segment_sum(jnp.broadcast_to(g[:, None], x.shape), r, 5),  # computed
                jax.ops.segment_max(jnp.ones_like(x), r, 5),           # another combiner
                jnp.ones((5, 4)).at[r].add(1.0),                       # starts from ones
                jax.ops.segment_sum(jnp.ones((x.shape[0], 1)), r, 5),  # one column
                jax.ops.segment_sum(x, r, 5),                          # rows of x
                jax.ops.segment_sum(jnp.ones_like(x), r, 5))           # a count: taken

    ids, edge = _ids(20, 5)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 4)).astype(np.float32)
    g = rng.standard_normal(20).astype(np.float32)
    work, _ = canon(f, [x, g, ids], PIPE, inputs=[[x, g, edge]])
    # one gather: the last output's row of ones, none for the forms above it
    assert [op.opcode for op in work.entry.ops].count("gather") == 1


@pytest.mark.parametrize(("dtype", "edges", "stuck"), [("bfloat16", 3000, 256),
                                                        ("float16", 9000, 2048)])
def test_counts_past_the_last_exact_integer_stick_where_xla_does(dtype, edges, stuck):
    """Adding ones one by one in bf16 stops at 256 (256 + 1 rounds back to 256), in f16 at
    2048: the kernel adds in XLA's order and type, so it stops there too."""
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    def count(r):
        return jax.ops.segment_sum(jnp.ones((edges, 8), dtype), r, 3)

    r = np.random.default_rng(1).integers(0, 3, edges).astype(np.int32)
    m = from_jax(count, r).module
    for excess in (True, False):
        res = rewrite_module(m, cost_model=False, excess_precision=excess)
        assert [c["kind"] for c in res.clusters] == ["segment_reduce"]
        (got,) = run_module(res.module, [r], {"xla_allow_excess_precision": excess})
        assert np.all(got.astype(np.float32) == stuck)
        _same_on_xla(m, res.module, [[r]])
