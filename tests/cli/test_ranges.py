"""Every numeric flag and target value range-checked (integers that fit the C++ type that gets
them, finite floats), unknown ``run --inputs`` keys reported, long values cut in the one error
line. Before: ``--verify_atol=nan`` and ``lanes = 2**64`` were accepted, extra npz keys
ignored, a 100 KB flag value echoed whole and a 100 KB unknown flag name a RecursionError."""

import re
from pathlib import Path

import numpy as np
import pytest

from ember_xla.cli.errors import MAX_MESSAGE

FIXTURES = Path(__file__).parents[1] / "rewrites" / "fixtures"
GOOD = FIXTURES / "jax_padded_bag_sum.hlo"  # params f32[12,4] t.1, s32[4,5] ids.1
CONFIGS = Path(__file__).parents[2] / "configs"


@pytest.mark.parametrize("flag, needle", [
    ("--verify_atol=nan", "finite"), ("--timeout_s=inf", "finite"),
    ("--seed=-1", "[0, "), (f"--seed={2**63}", "[0, "), (f"--repeat={2**40}", "[0, "),
    (f"--unknown_dim={2**40}", "[1, "), ("--workers=100000", "[1, 1024]"),
    (f"--verify_elements={2**64}", "[0, "), (f"--cluster={2**31}", "[0, ")])
def test_numeric_flag_out_of_range(cli, error_line, flag, needle):
    line = error_line(cli("inspect", str(GOOD), flag))
    assert flag.split("=")[0] in line and needle in line, line


@pytest.mark.parametrize("arg", [
    "--emit=" + "x" * 100_000, "--" + "x" * 100_000 + "=1", "--seed=" + "9" * 100_000])
def test_long_values_are_cut(cli, error_line, arg):
    line = error_line(cli("inspect", str(GOOD), arg))
    assert len(line) < MAX_MESSAGE + 100, len(line)


def test_long_model_path_is_cut(cli, error_line):
    line = error_line(cli("inspect", "/tmp/" + "y" * 100_000))
    assert len(line) < MAX_MESSAGE + 100 and "characters cut" in line, line[:300]


@pytest.mark.parametrize("edit, needle", [
    (("lanes = ", f"lanes = {2**64}"), "out of range"),
    (("lanes = ", f"lanes = {2**53}"), "out of range"),
    (("clock_ghz = ", "clock_ghz = inf"), "finite"),
    (("clock_ghz = ", "clock_ghz = nan"), "finite"),
])
def test_target_values_out_of_range(cli, error_line, tmp_path, edit, needle):
    text = (CONFIGS / "tiny.toml").read_text()
    key, new = edit
    text, n = re.subn(rf"^{re.escape(key)}.*$", new, text, count=1, flags=re.M)
    assert n == 1, key
    f = tmp_path / "t.toml"
    f.write_text(text)
    line = error_line(cli("emulate", str(GOOD), f"--target={f}"))
    assert needle in line and key.split()[0] in line and str(f) in line, line


def test_unknown_npz_keys_are_reported(cli, error_line, tmp_path):
    f = tmp_path / "in.npz"
    np.savez(f, np.ones((12, 4), np.float32), np.zeros((4, 5), np.int32),
             extra=np.ones(3), typo_ids=np.zeros(2))
    line = error_line(cli("run", str(GOOD), f"--inputs={f}"))
    assert "'extra'" in line and "'typo_ids'" in line and "2 array(s)" in line, line
    ok = tmp_path / "ok.npz"
    np.savez(ok, np.ones((12, 4), np.float32), np.zeros((4, 5), np.int32))
    p = cli("run", str(GOOD), f"--inputs={ok}")
    assert p.returncode == 0, p.stderr
