"""padded_bag clusters (as the rewrite produces them: jnp.take(...).sum(axis=1) — max/min bags
stay in XLA for XLA:CPU's NaN semantics (docs/RELIABILITY.md), their lowering is covered by
the direct ember.padded_bag calls of test_lower_ffi_calls.py —
per-lookup weights, 0/1 padding masks, f32 reduction of bf16/f16 rows) and grouped tables,
lowered to SLC and checked against XLA:CPU (bit for bit for these small unweighted bags; the
check itself allows XLA its reduce order and FMA contraction for padded bags, see check.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lowering_cases import DT, arrays, check_fn, rewritten

REDUCE = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min}


@pytest.mark.parametrize("combiner", ["sum"])
@pytest.mark.parametrize("lookup", ["fill", "clip", "index"])
def test_combiners_and_modes(combiner, lookup):
    t, ids = arrays(7, 3, (4, 5))

    def fn(t, i):
        rows = {"fill": lambda: jnp.take(t, i, axis=0),
                "clip": lambda: jnp.take(t, i, axis=0, mode="clip"),
                "index": lambda: t[i]}[lookup]()
        return REDUCE[combiner](rows, axis=1)

    check_fn(fn, (t, ids), expect={"combiner": combiner, "kind": "padded_bag"}, bitwise=True)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_table_type_accumulation(dtype):
    t, ids = arrays(6, 2, (3, 4), dtype)
    check_fn(lambda t, i: jnp.take(t, i, axis=0).sum(axis=1), (t, ids), bitwise=True)


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_weights(dtype):
    """Weighted: XLA:CPU fuses the f32 multiply into the reduce as an FMA, so the check
    compares with a tolerance there and bit for bit with the kernel (see check.py)."""
    t, ids = arrays(6, 3, (3, 4), dtype)
    w = np.zeros((3, 4), DT[dtype])
    check_fn(lambda t, i, w: (jnp.take(t, i, axis=0) * w[:, :, None]).sum(axis=1), (t, ids, w),
             expect={"weighted": True})


def test_weights_fused_multiply_add():
    """The CPU rewrite gives a weighted f32 sum the kernel order ``sequential_fma`` (XLA:CPU's
    contracted multiply-reduce loop); the lowering adds each weighted element with one
    ``arith.fma``, so the program equals the kernel and XLA:CPU bit for bit."""
    from ember_xla.call_specs import ember_calls
    from ember_xla.dae_target.lower.to_slc import lower_call
    from ember_xla.ir.printer import print_module

    t, ids = arrays(6, 3, (3, 4))
    w = np.zeros((3, 4), np.float32)

    def fn(t, i, w):
        return (jnp.take(t, i, axis=0) * w[:, :, None]).sum(axis=1)

    (spec,) = check_fn(fn, (t, ids, w), expect={"weighted": True, "sum_order": "sequential_fma"},
                       bitwise=True)
    (call,) = ember_calls(rewritten(fn, (t, ids, w)))
    text = print_module(lower_call(call))
    assert '"arith.fma"' in text and spec.kind == "padded_bag"


def test_padding_mask():
    """A 0/1 mask from the ids (padding id -1) multiplied in: the rewrite passes it as weights."""
    t, ids = arrays(6, 2, (3, 5))

    def fn(t, i):
        mask = (i >= 0).astype(t.dtype)
        return (jnp.take(t, jnp.maximum(i, 0), axis=0) * mask[:, :, None]).sum(axis=1)

    check_fn(fn, (t, ids))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("weighted", [False, True])
def test_f32_reduction_of_narrow_rows(dtype, weighted):
    """rows (times weights of T's type) converted to f32 and summed in f32."""
    t, ids = arrays(6, 2, (3, 4), dtype)
    w = np.zeros((3, 4), DT[dtype])

    def fn(t, i, w):
        rows = jnp.take(t, i, axis=0)
        rows = rows * w[:, :, None] if weighted else rows
        return rows.astype(jnp.float32).sum(axis=1)

    (spec,) = check_fn(fn, (t, ids, w), expect={"weighted": weighted})
    assert spec.outputs[0].dtype == "f32"


@pytest.mark.parametrize("combiner", ["sum", "max"])
def test_grouped_tables(combiner):
    """Two tables (different N, D, dtypes) in one grouped call: two sub-programs."""
    op = {"sum": jax.ops.segment_sum, "max": jax.ops.segment_max}[combiner]
    t1, i1 = arrays(6, 2, (5,))
    t2, i2 = arrays(4, 3, (7,), "bf16")

    def fn(t1, i1, s1, t2, i2, s2):
        return op(t1[i1], s1, num_segments=3), op(t2[i2], s2, num_segments=2)

    (spec,) = check_fn(fn, (t1, i1, i1.copy(), t2, i2, i2.copy()), group=True)
    assert spec.kind == "grouped_segment_reduce" and len(spec.parts) == 2
