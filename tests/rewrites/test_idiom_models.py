"""The idiom zoo's builders and inputs work: each original module runs on XLA:CPU (through
HloModuleProto -> StableHLO -> compile, the way rewritten modules will run) and matches the
framework's own jit result, for random and edge inputs: bit for bit for JAX; for TF within the
idiom's tolerance where TF's runtime divides exactly and jaxlib's XLA:CPU does not."""

import pathlib
import sys

import numpy as np
import pytest

_HERE = pathlib.Path(__file__).parent

im = sys.modules["idiom_models"]  # loaded by conftest.py

NAMES = [i.name for i in im.IDIOMS]


def _run_proto(proto: bytes, args):
    import jax
    import jax.extend  # noqa: F401
    import jaxlib._jax as jx

    backend = jax.extend.backend.get_backend("cpu")
    dev = backend.local_devices()[0]
    mlir = jx.mlir.hlo_to_stablehlo(proto)
    exe = backend.compile_and_load(mlir, jx.DeviceList((dev,)), jx.CompileOptions())
    with jax.enable_x64(True):  # else device_put narrows s64 inputs to s32
        bufs = [jax.device_put(a, dev) for a in args]
    return [np.asarray(o) for o in exe.execute(bufs)]


def test_import_does_not_import_tensorflow():
    import subprocess

    path = str(_HERE / "idiom_models.py")
    code = ("import importlib.util, sys; "
            f"s = importlib.util.spec_from_file_location('m', {path!r}); "
            "m = importlib.util.module_from_spec(s); sys.modules['m'] = m; "
            "s.loader.exec_module(m); "
            "assert 'tensorflow' not in sys.modules and 'jax' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_idiom_table_is_consistent():
    assert len(set(NAMES)) == len(NAMES)
    for it in im.IDIOMS:
        assert it.framework in ("jax", "tf")
        assert it.kind in ("segment_reduce", "padded_bag", "offsets_bag")
        assert it.combiner in ("sum", "mean", "max", "min", "sqrt_n")
        assert (_HERE / "fixtures" / f"{it.name}.hlo").is_file(), it.name


@pytest.mark.parametrize("name", NAMES)
def test_original_module_runs_and_matches_framework(name):
    proto, text = im.hlo(name)
    assert text.startswith("HloModule")
    entry = text.split("\nENTRY ", 1)[1].split("\n}", 1)[0]
    n_params = sum(" parameter(" in line for line in entry.splitlines())
    for case in ("random", "edge"):
        args = im.inputs(name, case)
        assert len(args) == n_params
        got = _run_proto(proto, args)
        want = im.reference(name, args)
        assert len(got) == len(want)
        tol = im.idiom(name).tolerance
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            if im.idiom(name).framework == "jax" or tol == 0.0:
                # same XLA:CPU as jax.jit: bitwise (NaN payloads included)
                np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=case)
            else:
                # TF's own XLA:CPU divides exactly where jaxlib multiplies by a reciprocal
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                           rtol=tol, atol=tol, equal_nan=True, err_msg=case)
