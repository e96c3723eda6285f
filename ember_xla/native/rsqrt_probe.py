"""Does the native Adagrad kernel's rsqrt give XLA:CPU's bits on this machine? XLA's f32 rsqrt
is a hardware estimate refined by Newton-Raphson, and the estimate instruction differs between
CPU vendors, so the rewrite asks once per process: the kernel's reproduction
(``EmberRsqrtProbe``) against ``jax.lax.rsqrt`` compiled by XLA:CPU, on values spread over
the whole f32 range plus zeros, denormals, infinities and NaN."""

from __future__ import annotations

import ctypes
import functools

import numpy as np


def probe_values(n: int = 1 << 18, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 0x7F800000, n, dtype=np.uint32)  # every positive finite float
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-45, 1.1754942e-38,
                        1.1754944e-38, 3.4028235e38, 1.0, 4.0, 1e-7], np.float32)
    return np.concatenate([bits.view(np.float32), special])


def native_rsqrt(x: np.ndarray) -> np.ndarray:
    from ember_xla.native import load_library

    fn = load_library().EmberRsqrtProbe
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    x = np.ascontiguousarray(x, np.float32)
    y = np.empty_like(x)
    fn(x.ctypes.data, y.ctypes.data, x.size)
    return y


@functools.cache
def xla_rsqrt_steps() -> int:
    """How many Newton-Raphson steps XLA:CPU's rsqrt takes after the estimate on this CPU (1
    on AMD, 2 elsewhere: native/xla_rsqrt.h)."""
    from ember_xla.native import load_library

    fn = load_library().EmberXlaRsqrtSteps
    fn.argtypes = []
    fn.restype = ctypes.c_int
    return int(fn())


def xla_rsqrt(x: np.ndarray) -> np.ndarray:
    import jax

    cpu = jax.local_devices(backend="cpu")[0]
    return np.asarray(jax.jit(jax.lax.rsqrt)(jax.device_put(x, cpu)))


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal bits, or both NaN (NaN payloads are not reproduced)."""
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


@functools.cache
def rsqrt_matches_xla() -> bool:
    from ember_xla.native import NativeLibraryMissing

    x = probe_values()
    try:
        ours = native_rsqrt(x)
    except (NativeLibraryMissing, AttributeError):
        return False
    return bool(same_bits(ours, xla_rsqrt(x)).all())
