"""Shared helpers of the lowering tests: build small JAX functions, rewrite them with
``ember_xla.rewrite_module``, lower every ember custom-call to SLC and check it against XLA:CPU
(``dae_target.check``)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ember_xla.call_specs import cluster_spec, ember_calls
from ember_xla.dae_target.check import check_lowered, summary
from ember_xla.dae_target.lower.to_slc import lower_call
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.ir.verify import verify_generic_module
from ember_xla.rewrites.pipeline import rewrite_module

DT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def rewritten(fn, args, group: bool = False, x64: bool = False):
    import jax

    with jax.enable_x64(x64):
        model = from_jax(fn, *args)
    return rewrite_module(model.module, group=group).module


def check_fn(fn, args, group: bool = False, x64: bool = False, rounds: int = 2,
             expect: dict | None = None, bitwise: bool = False) -> list:
    """Lower every ember call of ``fn``'s rewritten module; each must verify and match XLA:CPU
    (``expect``: spec attributes each call must have, so the case tests what it says;
    ``bitwise``: also bit for bit where the check only requires a tolerance)."""
    module = rewritten(fn, args, group, x64)
    calls = ember_calls(module)
    assert calls, "the rewrite produced no ember custom-call"
    specs = []
    for call in calls:
        spec = cluster_spec(call)
        for k, v in (expect or {}).items():
            assert getattr(spec, k) == v, (k, getattr(spec, k), v)
        low = lower_call(call)
        verify_generic_module(low)
        res = check_lowered(module, call, low, rounds=rounds)
        assert res.ok, summary(res)
        assert res.bitwise or not bitwise, summary(res)
        specs.append(spec)
    return specs


def arrays(n: int, d: int, lookups: tuple[int, ...], dtype: str = "f32",
           id_dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """Placeholder arrays (only shapes and dtypes matter for tracing)."""
    return np.zeros((n, d), DT[dtype]), np.zeros(lookups, id_dtype)


def ffi_fn(kind: str, out_shapes: list[tuple[tuple[int, ...], object]], **attrs):
    """A JAX function calling the ``ember.<kind>`` custom-call directly (any attribute
    combination of the contract; no outlined computation: checked against the kernel)."""
    import jax

    from ember_xla.custom_calls import target_of_kind
    from ember_xla.native import register_targets

    register_targets()
    outs = [jax.ShapeDtypeStruct(s, d) for s, d in out_shapes]
    call = jax.ffi.ffi_call(target_of_kind(kind).name, outs if len(outs) > 1 else outs[0])
    full = {"combiner": "sum", "index_mode": "clip", "wrap_negative": False,
            "weighted": False, "init": 0.0, "index_bits": 64}
    if kind == "padded_bag":
        full["sum_order"] = "sequential"
        full["row_type"] = ""
    full.update(attrs)

    def fn(*args):
        return call(*args, **full)

    return fn
