"""The static rule of native/row_mean_order.py against XLA:CPU, one case per class it states:
``jnp.mean(g * g, axis=1)`` compiled by XLA (both excess-precision settings) and the kernel's
mean in the rule's order, bit for bit, on rows whose magnitudes spread over many binades (so
different orders give different bits), at several V per class; and, for the classes it
refuses, that the rule refuses and that the kernel's orders really are not XLA's there."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

from ember_xla.native.padded_order import YNN_MIN_ELEMENTS  # noqa: E402
from ember_xla.native.row_mean_order import (  # noqa: E402
    BLOCKED16_WIDTHS,
    ORDER_CODES,
    OrderNotReproduced,
    has_avx2,
    native_row_mean_squares,
    row_mean_order,
)


def rows(v: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(-20, 20, (v, 1)))
    return (rng.standard_normal((v, d)) * scale).astype(np.float32)


def xla_mean_squares(g: np.ndarray, excess: bool) -> np.ndarray:
    f = jax.jit(lambda x: jnp.mean(x * x, axis=1)).lower(g).compile(
        compiler_options={"xla_allow_excess_precision": excess})
    return np.asarray(f(g))


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.tobytes() == b.tobytes()


# per width: the smallest V YNNPACK takes, two middle ones and a table of 1M+ elements (the
# order does not depend on V)
YNN = [(max(-(-YNN_MIN_ELEMENTS // d), 16), d) for d in sorted(BLOCKED16_WIDTHS)] + [
    (v, d) for d in sorted(BLOCKED16_WIDTHS) for v in (300, 2000)] + [
    (65536, 16), (32768, 32), (65536, 64), (16384, 128), (8192, 256)]
TWO = [(2048, 2), (5000, 2), (100_000, 2)]


@pytest.mark.skipif(not has_avx2(), reason="the blocked16 class was measured on AVX2 and "
                    "AVX-512; on this CPU the rule refuses it")
@pytest.mark.parametrize("v,d", YNN)
def test_ynnpack_class_is_blocked16(v, d):
    assert row_mean_order(v, d) == "blocked16"
    g = rows(v, d, v + d)
    ours = native_row_mean_squares(g, "blocked16")
    for excess in (True, False):
        assert same(ours, xla_mean_squares(g, excess)), (v, d, excess)


@pytest.mark.skipif(not has_avx2(), reason="measured on AVX2 and AVX-512 only; refused elsewhere")
@pytest.mark.parametrize("v,d", TWO)
def test_ynnpack_class_of_two_columns_is_sequential(v, d):
    assert row_mean_order(v, d) == "sequential"
    g = rows(v, d, v)
    for excess in (True, False):
        assert same(native_row_mean_squares(g, "sequential"), xla_mean_squares(g, excess))


@pytest.mark.parametrize("v", [1, 5, 20, 100, 4000, 5000, 20000])
def test_one_column_is_sequential(v):
    assert row_mean_order(v, 1) == "sequential"
    g = rows(v, 1, v)
    for excess in (True, False):
        assert same(native_row_mean_squares(g, "sequential"), xla_mean_squares(g, excess))


@pytest.mark.parametrize("v,d", [(300, 48), (300, 96), (300, 192), (300, 512), (1000, 8),
                                 (2000, 3)])
def test_ynn_widths_not_reproduced_are_refused(v, d):
    with pytest.raises(OrderNotReproduced, match="row-wise mean of g"):
        row_mean_order(v, d)
    g = rows(v, d, d)
    want = xla_mean_squares(g, True)
    assert not any(same(native_row_mean_squares(g, o), want) for o in ORDER_CODES
                   if o != "blocked16" or d % 16 == 0)


@pytest.mark.parametrize("v,d", [(10, 8), (20, 8), (23, 8), (60, 9), (20, 2)])
def test_own_loop_is_refused(v, d):
    with pytest.raises(OrderNotReproduced, match="LLVM vectorizes across rows"):
        row_mean_order(v, d)


@pytest.mark.parametrize("v,d", [(255, 16), (127, 32), (63, 64)])
def test_just_below_ynnpack_neither_order_is_xla(v, d):
    """One row fewer than YNNPACK's 4096 elements: XLA's own loop, which neither of the
    kernel's orders reproduces (so the refusal is needed, not only cautious)."""
    assert v * d < YNN_MIN_ELEMENTS <= (v + 1) * d
    with pytest.raises(OrderNotReproduced, match="LLVM vectorizes across rows"):
        row_mean_order(v, d)
    g = rows(v, d, v)
    for excess in (True, False):
        want = xla_mean_squares(g, excess)
        assert not any(same(native_row_mean_squares(g, o), want) for o in ORDER_CODES)


def test_own_loop_mixes_the_orders_within_one_gradient():
    """The claim behind refusing it: in a [23, 8] gradient XLA:CPU's loop rounds each square
    for the vectorized rows and fuses square and add for its last, scalar row."""
    g = rows(23, 8, 8)
    want = xla_mean_squares(g, True)
    rounded = native_row_mean_squares(g, "sequential")
    fused = np.zeros(23, np.float32)
    for j in range(8):  # fma(g, g, s): the square is exact in float64, one rounding to f32
        fused = (fused.astype(np.float64) + g[:, j].astype(np.float64) ** 2).astype(np.float32)
    fused = (fused / np.float32(8)).astype(np.float32)
    assert same(rounded[:16], want[:16]) and not same(rounded, want)
    assert fused[22].tobytes() == want[22].tobytes() != rounded[22].tobytes()
