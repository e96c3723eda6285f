"""scale-to-weights: rows * scalar, or * one weight per bag position, becomes rows * (that
value broadcast per lookup), the weighted-bag form; the multiply is the same element for
element (bitwise outputs)."""

import numpy as np
import pytest


def test_scalar_scale_becomes_per_lookup_weights(canon):
    def f(t, ids, a):
        return (t[ids] * a).sum(1)

    ids = np.array([[0, 9, -1], [12, 3, 3]], np.int32)
    args = [canon.table(), ids, np.float32(1.7)]
    work, _ = canon(f, args, "scale-to-weights",
                    inputs=[[canon.table(seed=4), ids, np.float32(-np.inf)]])
    mul = next(op for op in work.entry.ops if op.opcode == "multiply")
    w = next(o for o in mul.operands if o.owner.opcode == "broadcast")
    assert w.owner.attributes["dimensions"] == [0, 1]
    assert tuple(w.owner.operands[0].type.dims) == (2, 3)     # one weight per lookup


def test_scaled_bag_is_rewritten_as_weighted():
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    def f(t, ids, seg):   # a segment max (a scatter root: exact; max *bags* stay in XLA)
        return jax.ops.segment_max(t[ids] * jnp.sqrt(4.0), seg, num_segments=3)

    args = [np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32),
            np.array([0, 9, -1, 12, 3, 3], np.int32), np.array([0, 0, 1, 1, 2, 2], np.int32)]
    m = from_jax(f, *args).module
    r = rewrite_module(m)
    assert len(r.clusters) == 1 and r.clusters[0]["attributes"]["weighted"]
    assert run_module(r.module, args)[0].tobytes() == run_module(m, args)[0].tobytes()


def test_position_weights_become_per_lookup_weights(canon):
    def f(t, ids, w):
        return (t[ids] * w[None, :, None]).sum(1)

    ids = np.array([[0, 9, -1], [12, 3, 3]], np.int32)
    w = np.array([0.5, -2.0, 3.0], np.float32)
    work, _ = canon(f, [canon.table(), ids, w], "scale-to-weights",
                    inputs=[[canon.table(seed=4), ids, np.array([np.inf, -0.0, np.nan],
                                                                np.float32)]])
    mul = next(op for op in work.entry.ops if op.opcode == "multiply")
    w = next(o for o in mul.operands if o.owner.opcode == "broadcast")
    assert w.owner.attributes["dimensions"] == [0, 1]
    per_lookup = w.owner.operands[0].owner
    assert per_lookup.opcode == "broadcast" and per_lookup.attributes["dimensions"] == [1]
    assert tuple(per_lookup.result.type.dims) == (2, 3)


def test_per_bag_weights_are_left_alone(canon):
    """A weight per bag is constant along the bag: XLA:CPU factors it out of the sum, an order
    the per-lookup kernels do not reproduce, so the multiply keeps its form."""
    def f(t, ids, w):
        return (t[ids] * w[:, None, None]).sum(1)

    ids = np.array([[0, 9, -1], [12, 3, 3]], np.int32)
    work, _ = canon(f, [canon.table(), ids, np.array([0.5, 2.0], np.float32)],
                    "scale-to-weights")
    mul = next(op for op in work.entry.ops if op.opcode == "multiply")
    w = next(o for o in mul.operands if o.owner.opcode == "broadcast")
    assert w.owner.attributes["dimensions"] == [0]


@pytest.mark.parametrize("shape", [(4, 3, 8), (256, 6, 64), (2048, 20, 128)])
def test_position_weighted_bag_is_rewritten_bit_exact(shape):
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    b, p, d = shape

    def f(t, ids, w):   # position-weighted pooling (torchrec's PositionWeightedModule)
        return jnp.sum(t[ids] * w[None, :, None], axis=1)

    rng = np.random.default_rng(1)
    n = 1000
    args = [rng.standard_normal((n, d)).astype(np.float32),
            rng.integers(-n, 2 * n, (b, p)).astype(np.int32),
            rng.standard_normal(p).astype(np.float32)]
    m = from_jax(f, *args).module
    r = rewrite_module(m, cost_model=False)
    assert len(r.clusters) == 1 and r.clusters[0]["attributes"]["weighted"], r.near_misses
    for opts in ({}, {"xla_allow_excess_precision": False}):
        got = run_module(r.module, args, opts)[0]
        want = run_module(m, args, opts)[0]
        assert got.tobytes() == want.tobytes()
