"""The idiom zoo's builders and inputs work: each original module runs on XLA:CPU (through
HloModuleProto -> StableHLO -> compile, the way rewritten modules will run) and matches the
framework's own jit result bit for bit, for random and edge inputs."""

import importlib.util
import pathlib

import numpy as np
import pytest

_HERE = pathlib.Path(__file__).parent
_spec = importlib.util.spec_from_file_location("idiom_models", _HERE / "idiom_models.py")
im = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(im)

NAMES = [i.name for i in im.IDIOMS]


def _run_proto(proto: bytes, args):
    import jax
    import jax.extend  # noqa: F401
    import jaxlib._jax as jx

    backend = jax.extend.backend.get_backend("cpu")
    dev = backend.local_devices()[0]
    mlir = jx.mlir.hlo_to_stablehlo(proto)
    exe = backend.compile_and_load(mlir, jx.DeviceList((dev,)), jx.CompileOptions())
    return [np.asarray(o) for o in exe.execute([jax.device_put(a, dev) for a in args])]


def test_import_does_not_import_tensorflow():
    import subprocess
    import sys

    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('m', %r); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
            "assert 'tensorflow' not in sys.modules and 'jax' not in sys.modules, 'imported'"
            % str(_HERE / "idiom_models.py"))
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
    n_params = len(text.split("entry_computation_layout={(", 1)[1].split(")->", 1)[0]
                   .replace("{1,0}", "").replace("{0}", "").replace("{2,1,0}", "")
                   .split(",")) if "->" in text else None
    for case in ("random", "edge"):
        args = im.inputs(name, case)
        assert n_params is None or len(args) == n_params
        got = _run_proto(proto, args)
        want = im.reference(name, args)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            # bitwise, NaN == NaN
            np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8), err_msg=case)
