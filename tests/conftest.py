"""Shared test setup: quiet TensorFlow, CPU only, this folder on ``sys.path`` (for
``helper_modules``), and ``cli`` (run the real console script)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The tests check what a rewrite computes, mostly on tiny models that the measured cost model
# would (rightly) keep in XLA: rewrite every cluster here. tests/rewrites/test_profitability.py
# turns the cost model on explicitly.
os.environ.setdefault("EMBER_XLA_COST_MODEL", "off")
# the tests' helper modules (tests/helper_modules.py) import from here
sys.path.insert(0, str(Path(__file__).resolve().parent))



@pytest.fixture
def cli():
    """Run ``ember-xla`` as a user does: the installed console script (else the same entry
    point), outside the source tree, importing the ember_xla this test process imported."""
    import ember_xla

    script = Path(sys.executable).with_name("ember-xla")
    cmd = [str(script)] if script.exists() else [sys.executable, "-c",
                                                 "from ember_xla.cli import run; run()"]
    home = str(Path(ember_xla.__file__).resolve().parents[1])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=home)

    def run(*args, extra_env: dict[str, str] | None = None):
        return subprocess.run(cmd + list(args), capture_output=True, text=True,
                              env={**env, **(extra_env or {})}, cwd=tempfile.gettempdir(),
                              timeout=600)

    return run


@pytest.fixture
def error_line():
    """Checks a failed ``cli`` run the way a user sees it (exit 2, no traceback, exactly one
    ``ember-xla: error:`` line) and returns that line."""

    def check(proc):
        assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
        assert "Traceback" not in proc.stderr, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ember-xla: error:")]
        assert len(lines) == 1, proc.stderr
        return lines[0]

    return check
