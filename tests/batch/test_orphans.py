"""Batch workers die with their parent: ``kill -9`` of the batch process at any moment (while a
worker starts and imports, or runs a model) leaves no worker running, and the rerun finds the
folder free, completes every model and leaves no staging behind."""

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "fuzz"))
from env_cases import alive, children  # noqa: E402  (the tests folder is not a package)

FIXTURES = Path(__file__).parents[1] / "rewrites" / "fixtures"
MODELS = ["jax_gnn_segment_max.hlo", "jax_index_segment_min.hlo", "jax_padded_bag_sum.hlo",
          "jax_take_fill_segment_sum.hlo"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("orphan_models")
    for m in MODELS:
        shutil.copy(FIXTURES / m, d / m)
    return d


def _kill_and_check(kit, models: Path, out: Path, after_s: float) -> int:
    """SIGKILL the batch parent ``after_s`` seconds after its first worker appeared (0: at once,
    while the worker imports); returns how many workers it had."""
    p = kit.popen(f"--inputs={models}/*.hlo", f"--out={out}", "--workers=2",
                  "--progress=none", "--timeout_s=120")
    seen: set[int] = set()
    t_end = time.monotonic() + 300
    while not seen and time.monotonic() < t_end and p.poll() is None:
        seen |= children(p.pid)
        time.sleep(0.01)
    t_end = time.monotonic() + after_s
    while time.monotonic() < t_end and p.poll() is None:
        seen |= children(p.pid)
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    p.stderr.close()
    deadline = time.monotonic() + 5
    while any(alive(w) for w in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [w for w in seen if alive(w)]
    for w in survivors:  # never leave them running, even when the test fails
        os.kill(w, signal.SIGKILL)
    assert survivors == [], f"workers outlived the killed parent: {survivors}"
    return len(seen)


def _rerun_completes(kit, models: Path, out: Path) -> None:
    r = kit.run(f"--inputs={models}/*.hlo", f"--out={out}", "--progress=none")
    assert r.returncode == 0, r.stderr[-2000:]
    assert not (out / ".staging").exists() or not os.listdir(out / ".staging")
    assert len(os.listdir(out / "manifest")) == len(MODELS)


@pytest.mark.parametrize("after_s", [0.0, 0.5, 2.0, 6.0])
def test_sigkill_of_batch_leaves_no_worker(kit, models, tmp_path, after_s):
    out = tmp_path / "out"
    n = _kill_and_check(kit, models, out, after_s)
    assert n >= 1
    _rerun_completes(kit, models, out)


@pytest.mark.slow
def test_twenty_sigkills_of_batch(kit, models, tmp_path):
    """20 kills, each of a fresh job (so that it has workers to orphan), 0.3 s apart in when
    they strike after the first worker appeared; each folder's rerun completes."""
    for i in range(20):
        out = tmp_path / f"out{i}"
        assert _kill_and_check(kit, models, out, 0.3 * i) >= 1
        _rerun_completes(kit, models, out)
