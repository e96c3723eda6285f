"""Batch-job fixtures: a fleet of 51 small good models (JAX and TF; .pb, .hlo/.txt and
SavedModels, ember_xla.examples.fleet), 7 bad ones and one that needs 4 GB, built once per
session, and ``run_batch`` (the installed console script, as a user runs it)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

BAD = {  # file name -> what its one-line reason must mention
    "bad_truncated.pb": "bad_truncated.pb",
    "bad_random.pb": "bad_random.pb",
    "bad_empty.hlo": "empty",
    "bad_syntax.hlo": "bad_syntax.hlo:",
    "bad_nosig": "no serving signatures",
    "bad_hang.hlo": "timed out after",
    "bad_crash.pb": "crashed (SIGSEGV)",
}
TIMEOUT_S = 30          # per model; the good ones take ~0.1-2 s (~10 s on a loaded machine)
HANG_INSTRUCTIONS = 2_500_000  # ~60 s of parsing on an idle machine (more when loaded)
MEMORY_MB = 1500        # the memory test's limit: a worker without TensorFlow stays well below


def _cmd():
    script = Path(sys.executable).with_name("ember-xla")
    return [str(script)] if script.exists() else [sys.executable, "-c",
                                                  "from ember_xla.cli import run; run()"]


def batch_env(**extra):
    import ember_xla

    home = str(Path(ember_xla.__file__).resolve().parents[1])
    # the fleet's tables are tiny: the cost model would keep every cluster in XLA; these tests
    # check that every cluster is found, rewritten and verified
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=home,
                EMBER_XLA_BATCH_CRASH_ON="bad_crash", EMBER_XLA_COST_MODEL="off", **extra)


def run_batch(*args, timeout=900):
    return subprocess.run(_cmd() + ["batch", *args], capture_output=True, text=True,
                          env=batch_env(), cwd=tempfile.gettempdir(), timeout=timeout)


def popen_batch(*args):
    return subprocess.Popen(_cmd() + ["batch", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=batch_env(),
                            cwd=tempfile.gettempdir())


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    from ember_xla.examples.fleet import make_fleet

    d = tmp_path_factory.mktemp("fleet")
    paths = make_fleet(str(d), jax_variants=18, tf_variants=6, savedmodels=3)
    return d, paths


def _write_bad(d: Path, good_pb: Path) -> None:
    import tensorflow as tf

    data = good_pb.read_bytes()
    (d / "bad_truncated.pb").write_bytes(data[: len(data) // 2])
    (d / "bad_random.pb").write_bytes(np.random.default_rng(0).bytes(4096))
    (d / "bad_empty.hlo").write_bytes(b"")
    (d / "bad_syntax.hlo").write_text("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
                                      "  ROOT a = f32[4] add(p, q)\n}\n")
    (d / "bad_crash.pb").write_bytes(data)  # a good model; the worker's test hook crashes
    m = tf.Module()
    m.v = tf.Variable([1.0, 2.0])
    tf.saved_model.save(m, str(d / "bad_nosig"))
    with open(d / "bad_hang.hlo", "w") as f:
        f.write("HloModule hang\nENTRY e {\n  a0 = f32[8] parameter(0)\n")
        for i in range(1, HANG_INSTRUCTIONS):
            f.write(f"  a{i} = f32[8] add(a{i - 1}, a{i - 1})\n")
        f.write(f"  ROOT r = f32[8] negate(a{HANG_INSTRUCTIONS - 1})\n}}\n")


@pytest.fixture(scope="session")
def bad_models(tmp_path_factory, fleet):
    d = tmp_path_factory.mktemp("bad")
    _write_bad(d, Path(fleet[0]) / "jax_000_segsum_64x8.pb")
    return d


@pytest.fixture(scope="session")
def oom_model(tmp_path_factory):
    """A valid module with a 4 GB output: past any modest memory limit when verified."""
    d = tmp_path_factory.mktemp("oom")
    (d / "big_output.hlo").write_text("HloModule oom\nENTRY e {\n  p = f32[] parameter(0)\n"
                                      "  ROOT b = f32[1000000000] broadcast(p), "
                                      "dimensions={}\n}\n")
    return d / "big_output.hlo"


@pytest.fixture(scope="session")
def kit():
    """Helpers for the test modules (the tests folder is not a package)."""
    import types

    return types.SimpleNamespace(run=run_batch, popen=popen_batch, BAD=BAD,
                                 TIMEOUT_S=TIMEOUT_S, MEMORY_MB=MEMORY_MB)


@pytest.fixture(scope="session")
def fleet_run(tmp_path_factory, fleet, bad_models):
    """The whole fleet, good and bad, through one job (local runner, 2 workers)."""
    import time

    out = tmp_path_factory.mktemp("fleet_out")
    t0 = time.monotonic()
    p = run_batch(f"--inputs={fleet[0]}/*,{bad_models}/*", f"--out={out}", "--workers=2",
                  "--actions=rewrite,verify", f"--timeout_s={TIMEOUT_S}", "--progress=log")
    return p, out, time.monotonic() - t0
