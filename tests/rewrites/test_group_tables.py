"""Table batching: independent same-attribute segment reductions become one
``ember.grouped_segment_reduce`` call (each table still reported); dependent ones are not
grouped; outputs stay bitwise equal to the original on XLA:CPU."""

from __future__ import annotations

import numpy as np

from ember_xla.hlo.verifier import verify_module
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module


def _targets(m):
    return sorted(op.attributes["custom_call_target"] for op in m.walk()
                  if op.opcode == "custom-call")


def _args(rng, sizes, L=300, B=32):
    out = []
    for n in sizes:
        out += [rng.standard_normal((n, 8)).astype(np.float32),
                rng.integers(-n - 2, n + 2, L).astype(np.int32),
                rng.integers(-1, B + 1, L).astype(np.int32)]
    return out


def test_independent_tables_share_one_call():
    import jax
    import jax.numpy as jnp

    def f(*a):
        outs = [jax.ops.segment_sum(jnp.take(a[k], a[k + 1], axis=0), a[k + 2], num_segments=32)
                for k in range(0, len(a), 3)]
        return jnp.concatenate(outs, axis=1)

    args = _args(np.random.default_rng(0), (50, 700, 3, 1000))
    m = from_jax(f, *args).module
    r = rewrite_module(m, group=True)
    assert len(r.clusters) == 4  # the report still lists every table
    assert len(r.groups) == 1 and len(r.groups[0]["members"]) == 4
    # The concatenate of the pooled results joined the call (written in place, no copy).
    assert r.groups[0]["concatenated"]
    assert _targets(r.module) == ["ember.grouped_segment_reduce_concat"]
    assert not any(op.opcode == "concatenate" for op in r.module.entry.ops)
    verify_module(r.module)
    for seed in range(2):
        args = _args(np.random.default_rng(seed + 1), (50, 700, 3, 1000))
        want, got = run_module(m, args), run_module(r.module, args)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want, strict=True))
    assert _targets(rewrite_module(m).module) == ["ember.grouped_segment_reduce_concat"]
    ungrouped = rewrite_module(m, group=False)  # grouping is the default; off: separate calls
    assert _targets(ungrouped.module) == ["ember.segment_reduce"] * 4


def test_dependent_lookups_are_not_grouped():
    import jax
    import jax.numpy as jnp

    def f(t1, i1, s1, t2, s2):
        p1 = jax.ops.segment_sum(jnp.take(t1, i1, axis=0), s1, num_segments=16)
        i2 = jnp.argmax(p1, axis=1).astype(jnp.int32)  # lookups of table 2 depend on table 1
        return jax.ops.segment_sum(jnp.take(t2, i2, axis=0), s2, num_segments=4)

    rng = np.random.default_rng(5)
    args = [rng.standard_normal((40, 8)).astype(np.float32),
            rng.integers(0, 40, 64).astype(np.int32), rng.integers(0, 16, 64).astype(np.int32),
            rng.standard_normal((20, 8)).astype(np.float32),
            rng.integers(0, 4, 16).astype(np.int32)]
    m = from_jax(f, *args).module
    r = rewrite_module(m, group=True)
    assert len(r.clusters) == 2 and not r.groups
    assert _targets(r.module) == ["ember.segment_reduce"] * 2
    want, got = run_module(m, args), run_module(r.module, args)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def _stage(tail):
    import jax
    import jax.numpy as jnp

    def f(*a):
        outs = [jax.ops.segment_sum(jnp.take(a[k], a[k + 1], axis=0), a[k + 2], num_segments=32)
                for k in range(0, len(a) - 1, 3)]
        return tail(outs, a[-1])

    return f


def test_results_not_only_concatenated_keep_the_tuple_form():
    """Pooled results used elsewhere too, or concatenated with another array, or concatenated
    in a permuted order: only the permutation still fuses (columns follow the concatenate)."""
    import jax.numpy as jnp

    cases = {
        "tuple": (lambda o, x: (o[0], o[1] * 2.0, o[2], x), "ember.grouped_segment_reduce"),
        "extra": (lambda o, x: jnp.concatenate(o + [x], axis=1), "ember.grouped_segment_reduce"),
        "reused": (lambda o, x: (jnp.concatenate(o, axis=1), o[0], x),
                   "ember.grouped_segment_reduce"),
        "permuted": (lambda o, x: (jnp.concatenate([o[2], o[0], o[1]], axis=1), x),
                     "ember.grouped_segment_reduce_concat"),
    }
    for name, (tail, target) in cases.items():
        rng = np.random.default_rng(7)
        args = _args(rng, (60, 5, 900)) + [rng.standard_normal((32, 3)).astype(np.float32)]
        m = from_jax(_stage(tail), *args).module
        r = rewrite_module(m, group=True)
        assert _targets(r.module) == [target], name
        verify_module(r.module)
        want, got = run_module(m, args), run_module(r.module, args)
        assert all(np.array_equal(a, b, equal_nan=True)
                   for a, b in zip(got, want, strict=True)), name
