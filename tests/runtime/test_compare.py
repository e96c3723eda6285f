"""``runtime.compare``: equal infinities and NaN against NaN are a difference of 0 (they were
``inf``, with a RuntimeWarning from ``inf - inf``); unequal infinities and NaN against a number
are ``inf``; the report of ``rewrite --verify`` on outputs holding them is strict JSON."""

import json
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from ember_xla.runtime.compare import compare_outputs, equal_values_note, max_float_diff

INF, NAN = np.inf, np.nan


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_equal_infinities_are_no_difference(dtype):
    a = np.array([INF, -INF, NAN, 1.0, 0.0], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert max_float_diff(a, a.copy()) == 0.0
        r = compare_outputs([a], [a.copy()])
    assert r["max_abs_diff"] == 0.0 and r["bitwise_equal"]


@pytest.mark.parametrize("want, got, diff", [
    ([INF], [-INF], math.inf), ([NAN], [1.0], math.inf), ([1.0], [NAN], math.inf),
    ([INF], [1.0], math.inf), ([1.0, INF], [1.5, INF], 0.5), ([-0.0], [0.0], 0.0)])
def test_differences(want, got, diff):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got_diff = max_float_diff(np.array(want, np.float32), np.array(got, np.float32))
    assert got_diff == diff


def test_empty():
    assert max_float_diff(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)) == 0.0


HLO = """HloModule inf_outputs

region {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  t = f32[12,4]{1,0} parameter(0)
  ids = s32[4,5]{1,0} parameter(1)
  r = s32[4,5,1]{2,1,0} reshape(ids)
  g = f32[4,5,4]{2,1,0} gather(t, r), offset_dims={2}, collapsed_slice_dims={0}, \
start_index_map={0}, index_vector_dim=2, slice_sizes={1,4}
  z = f32[] constant(0)
  bag = f32[4,4]{1,0} reduce(g, z), dimensions={1}, to_apply=region
  i = f32[] constant(inf)
  ni = f32[] constant(-inf)
  n = f32[] constant(nan)
  ib = f32[4,4]{1,0} broadcast(i), dimensions={}
  pinf = f32[4,4]{1,0} add(bag, ib)
  nib = f32[3]{0} broadcast(ni), dimensions={}
  nb = f32[2]{0} broadcast(n), dimensions={}
  ROOT out = (f32[4,4]{1,0}, f32[3]{0}, f32[2]{0}) tuple(pinf, nib, nb)
}
"""


def test_verify_report_of_infinite_outputs_is_strict_json(tmp_path, cli):
    model = tmp_path / "inf.hlo"
    model.write_text(HLO)
    out = tmp_path / "o"
    p = cli("rewrite", str(model), "--out", str(out), "--verify")
    assert p.returncode == 0, p.stderr
    assert "RuntimeWarning" not in p.stderr and "max abs difference 0" in p.stdout, p.stdout

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    report = json.loads((out / "report.json").read_text(), parse_constant=refuse)
    assert report["clusters"], "the bag must be rewritten for the comparison to mean anything"
    assert report["verify"]["max_abs_diff"] == 0.0 and report["verify"]["bitwise_equal"]




def _relu_bag_dot(t, ids):
    import jax
    import jax.numpy as jnp

    return jax.nn.relu(t[ids].sum(1)) @ jnp.ones((t.shape[1], 4), t.dtype)


def test_verify_names_xla_miscompiling_the_original(tmp_path, cli):
    """A bag whose sum XLA:CPU fuses, with a ReLU, into a YNNPACK dot with a broadcast
    constant: jaxlib 0.10.2 computes the original wrong there. The rewrite (the bag as a
    kernel, bit-equal to numpy's row order here up to the dot) then differs from it; verify
    must still refuse (nothing written) and say that XLA disagrees with itself."""
    import jax
    import jax.numpy as jnp

    v, d, b, p = 50_000, 32, 512, 20
    rng = np.random.default_rng(0)
    t = rng.standard_normal((v, d)).astype(np.float32)
    ids = rng.integers(0, v, (b, p)).astype(np.int32)
    want = np.maximum(t[ids].sum(1), 0) @ np.ones((d, 4), np.float32)
    if np.abs(np.asarray(jax.jit(_relu_bag_dot)(t, ids)) - want).max() < 1e-3:
        pytest.skip("this jaxlib computes the fused reduce + dot with a constant right")
    lowered = jax.jit(_relu_bag_dot).lower(jax.ShapeDtypeStruct((v, d), jnp.float32),
                                           jax.ShapeDtypeStruct((b, p), jnp.int32))
    model = tmp_path / "relu_bag_dot.pb"
    model.write_bytes(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
    out = tmp_path / "o"
    p1 = cli("rewrite", str(model), "--out", str(out), "--verify")
    assert p1.returncode == 1 and not out.exists(), p1.stdout + p1.stderr
    assert "XLA:CPU miscompiles the original: without its YNNPACK fusions" in p1.stderr, p1.stderr
    assert "nothing written" in p1.stderr and "Traceback" not in p1.stderr
    p2 = cli("rewrite", str(model), "--out", str(out), "--verify",
             extra_env={"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type="})
    assert p2.returncode == 0, p2.stderr
    assert json.loads((out / "report.json").read_text())["clusters"]


def test_equal_values_note_names_nan_and_zero_sign_differences():
    nan_sign = compare_outputs([np.array([np.nan, 1.0], np.float32)],
                               [np.array([-np.nan, 1.0], np.float32)])
    zero_sign = compare_outputs([np.array([0.0], np.float32)], [np.array([-0.0], np.float32)])
    for check in (nan_sign, zero_sign):
        assert not check["bitwise_equal"] and check["max_abs_diff"] == 0
        assert "only NaN payloads or signs of zeros differ" in equal_values_note(check)
    assert equal_values_note(compare_outputs([np.ones(2, np.float32)],
                                             [np.ones(2, np.float32)])) == ""
    assert equal_values_note(compare_outputs([np.ones(2, np.float32)],
                                             [np.zeros(2, np.float32)])) == ""


def test_timing_a_module_that_donates_its_parameters():
    """A training step exported with donated parameters (``input_output_alias``, what TF gives
    a variable it updates) consumes their buffers on each run: timing gives it fresh copies
    (before, the second run failed with "Array has been deleted")."""
    import functools

    import jax

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.runtime.compare import time_modules

    @functools.partial(jax.jit, donate_argnums=0)
    def step(t, g):
        return t - 0.5 * g

    args = [np.ones((64, 8), np.float32), np.ones((64, 8), np.float32)]
    m = from_jax(step, *args).module
    assert m.donated_parameters() == {0}
    times = time_modules({"a": m, "b": m.clone()}, args, repeats=3)
    assert set(times) == {"a", "b"} and all(t > 0 for t in times.values())


def test_zero_tolerance_names_the_largest_difference():
    """With --verify_atol=0 --verify_rtol=0 every difference is beyond the tolerance by an
    infinite ratio: the one named is the largest, not the first."""
    want = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    got = np.array([1.0, 2.0 + 2.4e-7, 3.0, 4.0 + 1e-3], np.float32)
    r = compare_outputs([want], [got], atol=0.0, rtol=0.0)["outputs"][0]
    assert r["beyond"]["where"] == [3] and r["where"] == [3]
