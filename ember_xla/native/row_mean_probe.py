"""Does the rowwise-Adagrad kernel's ``mean(g * g, axis=1)`` give XLA:CPU's bits for rows of
width D on this machine? XLA:CPU hands that reduce to YNNPACK when it has at least
``YNN_MIN_ELEMENTS`` elements, and YNNPACK's order of the adds depends on the CPU's vector width
and on D (native/rowwise_adagrad.cc: reproduced for D = 16 .. 128 and 256 on an AVX-512 CPU,
not for 192 or 512); below that size XLA's own loop adds in another order. So the rewrite asks
once per (D, size class) and process: the kernel's order (``EmberRowMeanSquaresProbe``)
against ``jnp.mean(g * g, axis=1)`` compiled by XLA:CPU, with and without excess precision,
on rows whose magnitudes spread over many binades."""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from ember_xla.native.padded_order import YNN_MIN_ELEMENTS


def probe_rows(rows: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(-20, 20, (rows, 1)))
    return (rng.standard_normal((rows, d)) * scale).astype(np.float32)


def native_row_mean_squares(g: np.ndarray) -> np.ndarray:
    from ember_xla.native import load_library

    fn = load_library().EmberRowMeanSquaresProbe
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    fn.restype = None
    g = np.ascontiguousarray(g, np.float32)
    out = np.empty(g.shape[0], np.float32)
    fn(g.ctypes.data, g.shape[0], g.shape[1], out.ctypes.data)
    return out


def xla_row_mean_squares(g: np.ndarray, excess_precision: bool) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    cpu = jax.local_devices(backend="cpu")[0]
    x = jax.device_put(g, cpu)
    exe = jax.jit(lambda x: jnp.mean(x * x, axis=1)).lower(x).compile(
        compiler_options={"xla_allow_excess_precision": excess_precision})
    return np.asarray(exe(x))


@functools.cache
def _matches(rows: int, d: int) -> bool:
    from ember_xla.native import NativeLibraryMissing

    if d % 16:
        return False
    g = probe_rows(rows, d)
    try:
        ours = native_row_mean_squares(g)
    except (NativeLibraryMissing, AttributeError):
        return False
    return all(np.array_equal(ours.view(np.uint32), xla_row_mean_squares(g, e).view(np.uint32))
               for e in (True, False))


def row_mean_matches_xla(v: int, d: int) -> bool:
    """For a [V, D] f32 gradient: is the kernel's row-wise mean of squares XLA:CPU's? Tables
    large enough for YNNPACK are probed at one size of that class (its order does not depend
    on V); smaller ones at their own shape."""
    if v * d >= YNN_MIN_ELEMENTS:
        return _matches(max(-(-YNN_MIN_ELEMENTS // d), 256), d)
    return _matches(v, d)
