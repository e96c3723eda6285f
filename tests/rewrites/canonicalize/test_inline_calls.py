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


def test_jvp_wrapped_take_is_inlined_and_its_tuple_folded(canon):
    """value_and_grad of jnp.take: the forward is ``jvp_jit__take__`` returning a tuple (rows,
    indices for the transpose); after inline-calls no call, tuple or get-tuple-element is left
    but the entry's root tuple, and the lookup is found as a cluster."""
    import jax
    import jax.numpy as jnp

    table = canon.table()
    # a matrix head: a bag squared and summed would be fused into that sum's loop by XLA:CPU
    # (another order of adds: rewrites/reduce_merge.py) and stay in XLA
    head = np.linspace(-1, 1, 3 * table.shape[1]).reshape(table.shape[1], 3).astype(np.float32)

    def step(t, i):
        loss, g = jax.value_and_grad(
            lambda t: ((jnp.take(t, i, axis=0).sum(1) @ head) ** 2).sum())(t)
        return t - 0.1 * g, loss

    args = [table, np.array([[0, 9, 9], [3, -1, 2]], np.int32)]
    work, notes = canon(step, args, "inline-calls,fold-tuple-index")
    ops = canon.opcodes(work)
    assert "call" not in ops and "get-tuple-element" not in ops and ops.count("tuple") == 1
    assert not notes
    from ember_xla.hlo_import.jax_source import from_jax

    original = from_jax(step, *args).module
    assert any(op.opcode == "call" and op.name.startswith("jvp_jit__take__")
               for op in original.entry.ops)
    r = rewrite_module(original)
    assert [c["kind"] for c in r.clusters if c.get("pass", "forward") == "forward"] == [
        "padded_bag"]


def test_get_tuple_element_of_a_tuple_folds(canon):
    text = """HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  b = f32[3] parameter(1)
  t = (f32[2], f32[3]) tuple(a, b)
  g = f32[3] get-tuple-element(t), index=1
  ROOT n = f32[3] negate(g)
}"""
    work, _ = canon(text, [np.zeros(2, np.float32), np.arange(3, dtype=np.float32)],
                    "inline-calls,fold-tuple-index")
    assert canon.opcodes(work) == ["parameter", "parameter", "negate"]
