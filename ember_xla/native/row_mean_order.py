"""The order in which XLA:CPU sums ``g * g`` over each row of a ``[V, D]`` f32 gradient
(``jnp.mean(g * g, axis=1)``, the row-wise mean of a rowwise Adagrad update), as the
``sum_order`` of ``ember.sparse_rowwise_adagrad`` (native/rowwise_adagrad.cc): a static rule,
so a rewrite compiles nothing to decide it. Measured on XLA:CPU (jax/jaxlib 0.10.2; AVX-512
CPUs of both vendors, AMD EPYC Zen 4 and Intel Xeon, and an AVX2 CPU without AVX-512, AMD EPYC
Zen 3) with rows whose magnitudes spread over 40 binades, under both
``xla_allow_excess_precision`` settings, and held to XLA by tests/native/test_row_mean_order.py
for every class below:

- ``V * D >= YNN_MIN_ELEMENTS``: XLA:CPU hands the reduce to YNNPACK, whose order depends on
  the CPU's vector width and on D but not on V. With AVX-512, and with AVX2 (whose YNNPACK
  kernels sum the same 16 lanes as two 8-float vectors), it is the kernel's "blocked16" (16
  lanes, blocks of 64 columns) for D in ``BLOCKED16_WIDTHS`` (the powers of two 16 .. 256, at
  every V measured, from the smallest YNNPACK takes to tables of 1M elements); the other
  multiples of 16 up to 512 (48, 80, 96, 192, 272, 512, ...) differ, some of them only at
  some V, and CPUs without AVX2 are not measured. D = 2 is "sequential"
  (``0 + g0 * g0 + g1 * g1``, the squares rounded; D = 3 is neither).
- smaller gradients: XLA's own loop fusion over the rows, which LLVM vectorizes across rows:
  rows in the vector body add each rounded square, rows in the scalar remainder contract the
  square and the add into one fused multiply-add, and which rows fall where depends on V, D
  and the CPU (measured: [20, 8] all rounded, [10, 8] all fused, [23, 8] its last row
  fused). Only D = 1 (one square, which every order rounds alike) is reproduced there.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from ember_xla.native.padded_order import YNN_MIN_ELEMENTS, OrderNotReproduced, ynn_reduces

__all__ = ["BLOCKED16_WIDTHS", "OrderNotReproduced", "native_row_mean_squares",
           "row_mean_order"]

#: Row widths whose YNNPACK order is the kernel's "blocked16" (measured, AVX-512 and AVX2).
BLOCKED16_WIDTHS = frozenset((16, 32, 64, 128, 256))
#: The kernel's SumOrder codes (native/rowwise_adagrad.cc).
ORDER_CODES = {"blocked16": 0, "sequential": 1}


@functools.cache
def has_avx2() -> bool:
    """Does this CPU have AVX2 (AVX-512 CPUs have it too), the vector widths on which YNNPACK's
    order was measured?"""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return False


def row_mean_order(v: int, d: int) -> str:
    """XLA:CPU's order of ``sum(g * g, axis=1)`` for a ``[v, d]`` f32 gradient on this CPU, as
    the kernel's ``sum_order``; raises OrderNotReproduced with the reason otherwise."""
    shape = f"[{v}, {d}]"
    if d == 1:  # one square: every order gives its bits
        return "sequential"
    if ynn_reduces(v * d):
        if not has_avx2():
            raise OrderNotReproduced(
                f"the row-wise mean of g * g over a {shape} gradient is YNNPACK's, whose order "
                "depends on the CPU's vector width; it is reproduced on AVX2 and AVX-512 CPUs "
                "only")
        if d == 2:
            return "sequential"
        if d not in BLOCKED16_WIDTHS:
            raise OrderNotReproduced(
                f"the row-wise mean of g * g over D = {d}: YNNPACK's order for a {shape} "
                "gradient is reproduced for D in "
                f"{', '.join(map(str, sorted(BLOCKED16_WIDTHS)))} only")
        return "blocked16"
    raise OrderNotReproduced(
        f"the row-wise mean of g * g over a {shape} gradient (below YNNPACK's "
        f"{YNN_MIN_ELEMENTS} elements) is XLA's own loop, which LLVM vectorizes across rows: "
        "vectorized rows round each square, the scalar remainder fuses it into the add, and "
        "which rows are which depends on V, D and the CPU; not reproduced")


def native_row_mean_squares(g: np.ndarray, order: str) -> np.ndarray:
    """The kernel's ``mean(g * g, axis=1)`` in ``order`` (for the tests of the rule)."""
    from ember_xla.native import load_library

    fn = load_library().EmberRowMeanSquares
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                   ctypes.c_void_p]
    fn.restype = None
    g = np.ascontiguousarray(g, np.float32)
    out = np.empty(g.shape[0], np.float32)
    fn(g.ctypes.data, g.shape[0], g.shape[1], ORDER_CODES[order], out.ctypes.data)
    return out
