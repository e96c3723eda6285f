"""``runtime.compare``: equal infinities and NaN against NaN are a difference of 0 (they were
``inf``, with a RuntimeWarning from ``inf - inf``); unequal infinities and NaN against a number
are ``inf``; the report of ``rewrite --verify`` on outputs holding them is strict JSON."""

import json
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from ember_xla.runtime.compare import compare_outputs, max_float_diff

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


