"""scale-to-weights: rows * scalar becomes rows * (scalar broadcast per lookup), the
weighted-bag form; the multiply is the same element for element (bitwise outputs)."""

import numpy as np


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
