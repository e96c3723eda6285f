"""inline-calls: JAX's helper calls disappear; jnp.take(mode='wrap') then rewrites."""

import numpy as np

from ember_xla.rewrites.pipeline import rewrite_module


def test_take_helpers_are_inlined(canon):
    import jax.numpy as jnp

    args = [canon.table(), np.array([0, 9, -1, 10, -11, 3], np.int32)]
    work, notes = canon(lambda t, i: jnp.take(t, i, axis=0, mode="wrap").sum(0), args,
                        "inline-calls")
    assert "call" not in canon.opcodes(work) and "remainder" in canon.opcodes(work)
    assert len(work.graphs) == 2  # entry + the reduce's add
    assert not notes


def test_take_wrap_segment_sum_is_rewritten(canon):
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.runtime.execute import run_module

    def f(t, i, s):
        return jax.ops.segment_sum(jnp.take(t, i, axis=0, mode="wrap"), s, num_segments=3)

    args = [canon.table(), np.array([0, 9, -1, 10, -11, 23, 3], np.int32),
            np.array([0, 2, 2, 1, -1, 3, 0], np.int32)]
    m = from_jax(f, *args).module
    r = rewrite_module(m)
    assert len(r.clusters) == 1 and r.clusters[0]["attributes"]["index_mode"] == "clip"
    assert run_module(r.module, args)[0].tobytes() == run_module(m, args)[0].tobytes()
