"""fold-tuple-index: after inline-calls, a JVP call's tuple (primal rows, residual indices)
is read through get-tuple-element; each read becomes the tuple operand itself, so the forward
gather and the backward scatter share the index value."""

HLO = """HloModule m, entry_computation_layout={(f32[3,4]{1,0})->(f32[4,3]{1,0}, f32[3,4]{1,0})}

ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  n = f32[4,3]{1,0} transpose(x), dimensions={1,0}
  t = (f32[3,4]{1,0}, f32[4,3]{1,0}) tuple(x, n)
  a = f32[4,3]{1,0} get-tuple-element(t), index=1
  b = f32[3,4]{1,0} get-tuple-element(t)
  ROOT r = (f32[4,3]{1,0}, f32[3,4]{1,0}) tuple(a, b)
}
"""


def test_reads_of_a_built_tuple_fold(canon):
    import numpy as np

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    work, _ = canon(HLO, [x], "fold-tuple-index")
    ops = canon.opcodes(work)
    assert "get-tuple-element" not in ops  # index 1, and index 0 (the proto default)
    assert ops.count("tuple") == 1         # the built tuple is gone; the root stays


def test_jvp_tuple_gives_the_backward_the_forward_indices(canon):
    import jax
    import jax.numpy as jnp
    import numpy as np

    table = canon.table(20, 4)
    ids = np.array([[1, 3], [3, 19]], np.int32)

    def f(t, i):
        return jax.grad(lambda t: (jnp.take(t, i, axis=0) ** 2).sum())(t)

    work, _ = canon(f, [table, ids], "inline-calls,fold-tuple-index")
    (scatter,) = [op for op in work.entry.ops if op.opcode == "scatter"]
    (gather,) = [op for op in work.entry.ops if op.opcode == "gather"] or [None]
    assert gather is None or gather.operands[1] is scatter.operands[1]
    assert "get-tuple-element" not in canon.opcodes(work)


def test_remat_barrier_gives_the_backward_the_forward_indices(canon):
    """jax.checkpoint passes the ids (integers) and the cotangent (floats) through an
    opt-barrier: the ids are read through it, the float value keeps its barrier."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    table = canon.table(20, 4)
    ids = np.array([[1, 3], [3, 19]], np.int32)
    bag = jax.checkpoint(lambda t, i: jnp.take(t, i, axis=0).sum(1))

    def f(t, i):
        return jax.grad(lambda t: (bag(t, i) ** 2).sum())(t)

    work, _ = canon(f, [table, ids], "inline-calls,fold-tuple-index")
    ops = work.entry.ops
    (barrier,) = [op for op in ops if op.opcode == "opt-barrier"]
    (scatter,) = [op for op in ops if op.opcode == "scatter"]
    reads = [op for op in ops if op.opcode == "get-tuple-element"
             and op.operands[0].owner is barrier]
    assert [r.result.type.element_type for r in reads] == ["f32"]  # the ids' read folded

    def reaches_barrier(value):
        owner = value.owner
        if owner is barrier:
            return True
        return any(reaches_barrier(v) for v in owner.operands)

    assert not reaches_barrier(scatter.operands[1])
    assert reaches_barrier(scatter.operands[2])
