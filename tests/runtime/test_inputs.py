"""Random valid inputs: index parameters feeding gathers (also through JAX's helper calls,
reshapes and converts) and scatters get in-range values; other parameters random data."""

import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.runtime.inputs import random_inputs


def test_index_parameters_stay_in_bounds():
    import jax
    import jax.numpy as jnp

    def f(t, i, s, x, j):
        a = jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=7)
        return a, x * 2, t[j.astype(jnp.int32)]

    m = from_jax(f, np.ones((13, 4), np.float32), np.zeros(50, np.int32),
                 np.zeros(50, np.int32), np.ones(3, np.float32), np.zeros((2, 5), np.int32))
    for seed in range(3):
        t, i, s, x, j = random_inputs(m.module, seed)
        assert t.dtype == np.float32 and t.shape == (13, 4)
        assert i.min() >= 0 and i.max() < 13 and len(np.unique(i)) > 5
        assert s.min() >= 0 and s.max() < 7
        assert j.min() >= 0 and j.max() < 13
        assert x.dtype == np.float32
    a, b = random_inputs(m.module, 0), random_inputs(m.module, 0)
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))  # deterministic


def test_bound_parameters_take_given_values():
    m = from_jax(lambda x, y: x + y, np.ones(3, np.float32), np.ones(3, np.float32))
    v = np.array([1, 2, 3], np.float32)
    _, y = random_inputs(m.module, 0, bound={1: v})
    assert y is v or np.array_equal(y, v)
