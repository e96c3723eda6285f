"""The HLO -> StableHLO -> executable path computes what jax.jit computes: HLO's spelling of a
size-1 dim's broadcast (identity broadcast, reshape, broadcast) is folded back into the one
``broadcast_in_dim`` jax wrote, else XLA:CPU optimizes the module otherwise and other bits
come out (a GraphSAGE mean: two divides instead of one shared reciprocal)."""

from __future__ import annotations

import numpy as np

N, E, D = 1000, 5000, 16


def _sage_step():
    import jax
    import jax.numpy as jnp

    def loss(p, s, r, y):
        x, w = p
        agg = jax.ops.segment_sum(x[s], r, num_segments=N)
        deg = jax.ops.segment_sum(jnp.ones_like(r, dtype=x.dtype), r, num_segments=N)
        agg = agg / jnp.maximum(deg, 1.0)[:, None]
        return ((jnp.concatenate([x, agg], -1) @ w - y) ** 2).mean()

    def step(p, s, r, y):
        value, g = jax.value_and_grad(loss)(p, s, r, y)
        return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), value

    rng = np.random.default_rng(0)
    args = ((rng.standard_normal((N, D)).astype(np.float32),
             (rng.standard_normal((2 * D, 4)) * 0.1).astype(np.float32)),
            rng.integers(0, N, E).astype(np.int32), rng.integers(0, N, E).astype(np.int32),
            rng.standard_normal((N, 4)).astype(np.float32))
    return step, args


def _bits(tree) -> list[bytes]:
    import jax

    return [np.asarray(a).tobytes() for a in jax.tree.leaves(tree)]


def test_the_round_trip_gives_jax_jits_bits():
    import jax

    from ember_xla.runtime.xla_cpu import compile_proto

    step, args = _sage_step()
    want = _bits(jax.jit(step)(*args))
    proto = jax.jit(step).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    got = compile_proto(proto).run([np.asarray(a) for a in jax.tree.leaves(args)])
    assert [g.tobytes() for g in got] == want


def test_ember_jit_gives_jax_jits_bits_where_it_rewrites():
    import jax

    import ember_xla

    step, args = _sage_step()
    f = ember_xla.jit(step)
    assert _bits(f(*args)) == _bits(jax.jit(step)(*args))
    assert any(r["clusters"] for r in f.reports.values())


def test_the_fold_keeps_other_chains():
    """Only the identity broadcast + reshape dropping every size-1 dim + broadcast is folded."""
    import jax
    import jax.numpy as jnp
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    from jaxlib import _jax

    from ember_xla.runtime import xla_cpu

    def f(a, b):
        return a / jnp.maximum(b, 1.0)[:, None], jnp.transpose(b.reshape(8, 125))

    a, b = np.ones((1000, 4), np.float32), np.arange(1000, dtype=np.float32)
    proto = jax.jit(f).lower(a, b).compiler_ir("hlo").as_serialized_hlo_module_proto()
    with mlir.make_ir_context():
        module = ir.Module.parse(_jax.mlir.hlo_to_stablehlo(proto))
        assert xla_cpu._fold_size1_chains(module) == 1
        assert xla_cpu._fold_size1_chains(module) == 0
    got = xla_cpu.compile_proto(proto).run([a, b])
    assert [g.tobytes() for g in got] == _bits(jax.jit(f)(a, b))
