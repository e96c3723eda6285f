"""batch-dot-to-multiply: a dot contracting nothing, one operand all batch dims (BCOO's
``data * rows``), becomes ``multiply(broadcast(w), rows)`` bit for bit (what XLA's simplifier
makes of it); dots that contract, or whose batch dims do not lead, stay."""

import numpy as np


def _w_rows():
    rng = np.random.default_rng(0)
    w = rng.standard_normal(6).astype(np.float32)
    rows = rng.standard_normal((6, 4)).astype(np.float32)
    w[:3] = [np.inf, np.nan, -0.0]
    rows[3, :] = [0.0, -0.0, np.inf, np.nan]
    return w, rows


def test_elementwise_dot_becomes_a_multiply(canon):
    from jax import lax

    def f(w, rows):
        return lax.dot_general(w, rows, (((), ()), ((0,), (0,)))) + 1.0

    work, _ = canon(f, list(_w_rows()), "batch-dot-to-multiply")
    ops = canon.opcodes(work)
    assert "dot" not in ops and "multiply" in ops
    mul = next(op for op in work.entry.ops if op.opcode == "multiply")
    assert mul.operands[0].owner.opcode == "broadcast"  # the lhs stays first


def test_rhs_side_and_leading_batch_dims(canon):
    from jax import lax

    def f(rows, w):  # [2,3,4] x [2,3]: batch dims (0, 1) on both
        return lax.dot_general(rows, w, (((), ()), ((0, 1), (0, 1)))) * 2.0

    rng = np.random.default_rng(1)
    args = [rng.standard_normal((2, 3, 4)).astype(np.float32),
            rng.standard_normal((2, 3)).astype(np.float32)]
    work, _ = canon(f, args, "batch-dot-to-multiply")
    assert "dot" not in canon.opcodes(work)


def test_contracting_dots_stay(canon):
    def f(x, w):
        return x @ w

    rng = np.random.default_rng(2)
    args = [rng.standard_normal((3, 4)).astype(np.float32),
            rng.standard_normal((4, 5)).astype(np.float32)]
    work, _ = canon(f, args, "batch-dot-to-multiply")
    assert "dot" in canon.opcodes(work)
