"""The CLI's outputs on the built-in example and the test corpus, byte for byte (timing fields
and temporary paths masked): every command line of ``golden_outputs/driver.py`` run in one fresh
process and compared with ``golden_outputs/expected/``. A change that means to alter an output
re-records it with ``python tests/cli/golden_outputs/driver.py tests/cli/golden_outputs/expected``
and shows the diff in review. Cost: ~40 s (about 230 commands in one process)."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden_outputs"


def test_cli_outputs_are_unchanged(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_XLA_")}
    proc = subprocess.run([sys.executable, str(GOLDEN / "driver.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = sorted(p.name for p in (GOLDEN / "expected").iterdir())
    actual = sorted(p.name for p in tmp_path.iterdir())
    assert actual == expected
    changed = []
    for name in expected:
        want = (GOLDEN / "expected" / name).read_text()
        got = (tmp_path / name).read_text()
        if got != want:
            diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "now",
                                        lineterm="", n=1)
            changed.append(f"{name}:\n" + "\n".join(list(diff)[:30]))
    assert not changed, f"{len(changed)} outputs changed:\n" + "\n\n".join(changed[:5])
