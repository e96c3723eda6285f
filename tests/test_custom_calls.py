"""The ember target registry and the backend_config codec."""

import math

import pytest

from ember_xla import native
from ember_xla.custom_calls import (
    KERNEL_ATTRS,
    TARGETS,
    decode_backend_config,
    encode_backend_config,
    target_of_kind,
)


@pytest.mark.parametrize("init", [0.0, -1.5, 1e300, float("-inf"), float("inf"), -0.0,
                                  -3.4028234663852886e38])
def test_backend_config_round_trip(init):
    attrs = {"combiner": "max", "index_bits": 32, "index_mode": "fill", "init": init,
             "weighted": True, "wrap_negative": False}
    back = decode_backend_config(encode_backend_config(attrs))
    assert back.keys() == set(KERNEL_ATTRS)
    assert math.copysign(1, back["init"]) == math.copysign(1, init)
    assert {k: v for k, v in back.items() if k != "init"} == {
        k: v for k, v in attrs.items() if k != "init"}
    assert back["init"] == init


def test_nan_init_and_jax_spelling():
    assert math.isnan(decode_backend_config(b"{init = 0x7FF8000000000000 : f64}")["init"])
    jax_style = b'{combiner = "sum", index_bits = 64 : i64, init = 0.000000e+00 : f64}'
    assert decode_backend_config(jax_style) == {"combiner": "sum", "index_bits": 64,
                                                "init": 0.0}


@pytest.mark.parametrize("bad", [b"", b"combiner", b"{combiner = }", b"{x = @y}"])
def test_malformed_backend_config_is_a_value_error(bad):
    with pytest.raises(ValueError, match="backend_config"):
        decode_backend_config(bad)


def test_registry_is_the_one_source_of_names():
    assert set(native.TARGETS) == set(TARGETS)
    for t in TARGETS.values():
        assert target_of_kind(t.kind) is t
        assert t.name == f"ember.{t.kind}"


def test_mlir_f64_always_has_a_decimal_point():
    # "-3e+38 : f64" is not an MLIR float literal: XLA:CPU crashes on such a backend_config
    from ember_xla.custom_calls import mlir_f64

    assert mlir_f64(-3e38) == "-3.0e+38 : f64"
    assert mlir_f64(1e-07) == "1.0e-07 : f64"
    assert mlir_f64(0.5) == "0.5 : f64" and mlir_f64(2.0) == "2.0 : f64"
