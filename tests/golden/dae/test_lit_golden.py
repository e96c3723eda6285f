"""Run the lit/FileCheck golden tests of this folder (``*.mlir``) with the pip packages ``lit``
and ``filecheck``, against the installed ``ember-xla`` console script (the same one the ``cli``
fixture runs); a failing lit test fails this test with lit's output."""

import os
import subprocess
import sys
from pathlib import Path

import lit  # noqa: F401  (the test extra pins it: a missing package is an error, not a skip)

HERE = Path(__file__).parent


def test_lit_golden(tmp_path):
    import ember_xla

    env = dict(os.environ, EMBER_LIT_OUT=str(tmp_path),
               PYTHONPATH=str(Path(ember_xla.__file__).resolve().parents[1]))
    script = Path(sys.executable).with_name("ember-xla")
    if not script.exists():
        env["EMBER_XLA_CMD"] = f"'{sys.executable}' -c 'from ember_xla.cli import run; run()'"
    p = subprocess.run([sys.executable, "-c", "import lit.main; lit.main.main()", "-v",
                        str(HERE)], capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stdout[-20000:] + p.stderr[-5000:]
    n = sum(1 for f in HERE.glob("*.mlir"))
    assert f"Passed: {n}" in p.stdout or f"Passed : {n}" in p.stdout, p.stdout[-3000:]
