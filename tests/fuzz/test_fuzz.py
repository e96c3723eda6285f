"""The mutation fuzzer in the suite: fixed seed, ~1 minute of cases in CI; the `slow` run does
10,000 (numbers in docs/RELIABILITY.md). Every case must end in exit 0 with valid output or
exit 2 with one error line; never a traceback, internal error, signal, hang or a mixed/partial
output folder. The campaign runs in its own process (its fork server must not inherit this
process's XLA client threads)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CAMPAIGN = Path(__file__).with_name("campaign.py")


def _campaign(*args, timeout):
    import ember_xla

    home = str(Path(ember_xla.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=home, TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, str(CAMPAIGN), *args], capture_output=True, text=True,
                       env=env, timeout=timeout)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    res = json.loads(line[len("RESULT "):])
    report = [f"{f['why']}: {f['argv']} ({f['input']})\n{f['stderr']}" for f in res["failures"]]
    return res, f"{res['stats']}\n" + "\n".join(report[:10])


def test_fuzz_ci_budget():
    res, report = _campaign("--cases", "100000", "--seed", "7", "--budget", "60", timeout=600)
    assert res["stats"]["cases"] >= 50, report  # the budget bought real cases
    assert not res["failures"], report


@pytest.mark.slow
def test_fuzz_10000():
    res, report = _campaign("--cases", "10000", "--seed", "1", timeout=4 * 3600)
    assert res["stats"]["cases"] == 10000, report
    assert not res["failures"], report
