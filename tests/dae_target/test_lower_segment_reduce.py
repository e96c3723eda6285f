"""segment_reduce clusters lowered to SLC vs XLA:CPU: every lookup mode (fill, clip, x[idx]
= wrap negative + clip), index_bits 32/64, s32/s64 ids, f32/bf16/f16 tables, sum/max/min,
weights of T's type, sorted and unsorted ids (dropped ids and empty segments come from
check.random_inputs), D=1. (The segment_reduce rewrite does not match f32 accumulation of
bf16/f16 rows; those calls are tested in test_lower_ffi_calls.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lowering_cases import DT, arrays, check_fn

LOOKUPS = {
    "fill": lambda t, i: jnp.take(t, i, axis=0),
    "clip": lambda t, i: jnp.take(t, i, axis=0, mode="clip"),
    "index": lambda t, i: t[i],
}
OPS = {"sum": jax.ops.segment_sum, "max": jax.ops.segment_max, "min": jax.ops.segment_min}


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("lookup", sorted(LOOKUPS))
def test_modes_and_dtypes(lookup, dtype):
    t, i = arrays(7, 3, (9,), dtype)

    def fn(t, i, s):
        return jax.ops.segment_sum(LOOKUPS[lookup](t, i), s, num_segments=4)

    (spec,) = check_fn(fn, (t, i, i.copy()))
    assert spec.index_mode == ("fill" if lookup == "fill" else "clip")


@pytest.mark.parametrize("combiner", ["max", "min"])
@pytest.mark.parametrize("lookup", ["fill", "index"])
def test_max_min(combiner, lookup):
    t, i = arrays(6, 2, (8,), "f32")

    def fn(t, i, s):
        return OPS[combiner](LOOKUPS[lookup](t, i), s, num_segments=3, indices_are_sorted=False)

    check_fn(fn, (t, i, i.copy()), expect={"combiner": combiner})


def test_bf16_max():
    t, i = arrays(6, 4, (8,), "bf16")
    check_fn(lambda t, i, s: jax.ops.segment_max(t[i], s, num_segments=3), (t, i, i.copy()))


@pytest.mark.parametrize("lookup,index_bits", [("clip", 64), ("fill", 32), ("index", 32)])
def test_s64_ids(lookup, index_bits):
    """s64 ids: JAX converts them to s32 for a small table (index_bits=32: 2^32 + i wraps,
    check.random_inputs draws such ids), except for a clipping take (index_bits=64)."""
    t, i = arrays(9, 2, (7,), "f32", np.int64)

    def fn(t, i, s):
        return jax.ops.segment_sum(LOOKUPS[lookup](t, i), s, num_segments=3)

    check_fn(fn, (t, i, i.copy()), x64=True, expect={"index_bits": index_bits})


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_weighted_table_type(dtype):
    t, i = arrays(5, 3, (8,), dtype)
    w = np.zeros(8, DT[dtype])

    def fn(t, i, s, w):
        return jax.ops.segment_sum(t[i] * w[:, None], s, num_segments=4)

    check_fn(fn, (t, i, i.copy(), w), expect={"weighted": True})


def test_d1_and_one_segment():
    t, i = arrays(4, 1, (5,), "f32")
    check_fn(lambda t, i, s: jax.ops.segment_sum(t[i], s, num_segments=1), (t, i, i.copy()))
