"""A FIFO, a device or a socket wherever a path is read (MODEL of every command, ``--inputs``,
flagfiles and flagfiles they name, ``--target`` TOMLs, placement plans, a SavedModel's files,
``batch --inputs`` globs) is refused before it is opened: one line, exit 2, no hang. Before,
each of these blocked (a FIFO nobody writes), ``/dev/zero`` was read up to the size limit, and
a non-UTF-8 flagfile was a 29-line traceback."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "rewrites" / "fixtures"
GOOD = FIXTURES / "jax_gnn_segment_max.hlo"
HANG_S = 120  # far above the ~5 s a refusal takes on a loaded machine


@pytest.fixture
def run_cli():
    import ember_xla

    script = Path(sys.executable).with_name("ember-xla")
    cmd = [str(script)] if script.exists() else [sys.executable, "-c",
                                                 "from ember_xla.cli import run; run()"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(Path(ember_xla.__file__).resolve().parents[1]))

    def run(*args):
        try:
            return subprocess.run(cmd + list(args), capture_output=True, text=True, env=env,
                                  cwd=tempfile.gettempdir(), timeout=HANG_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"ember-xla {' '.join(args)} hung for {HANG_S} s")

    return run


@pytest.fixture
def fifo(tmp_path):
    def make(name):
        p = tmp_path / name
        os.mkfifo(p)
        return p

    return make


def _refused(p, error_line, *needles):
    line = error_line(p)
    assert "not a regular file" in line, line
    for n in needles:
        assert str(n) in line, line
    return line


@pytest.mark.parametrize("command", ["inspect", "rewrite", "run", "lower", "emulate"])
def test_fifo_model(run_cli, fifo, error_line, tmp_path, command):
    f = fifo("model.hlo")
    extra = ["--out", str(tmp_path / "o")] if command == "rewrite" else []
    _refused(run_cli(command, str(f), *extra), error_line, f, "FIFO")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_device_model(run_cli, error_line, device):
    _refused(run_cli("inspect", device), error_line, device, "character device")


def test_socket_model(run_cli, error_line, tmp_path):
    path = tmp_path / "s.pb"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        _refused(run_cli("inspect", str(path)), error_line, path, "socket")
    finally:
        s.close()


def test_fifo_in_a_saved_model(run_cli, fifo, error_line, tmp_path):
    d = tmp_path / "sm"
    d.mkdir()
    os.mkfifo(d / "saved_model.pb")
    _refused(run_cli("inspect", str(d)), error_line, "saved_model.pb", "FIFO")


def test_fifo_inputs_of_run(run_cli, fifo, error_line):
    _refused(run_cli("run", str(GOOD), f"--inputs={fifo('in.npz')}"), error_line, "in.npz")


@pytest.mark.parametrize("nested", [False, True])
def test_fifo_flagfile(run_cli, fifo, error_line, tmp_path, nested):
    f = fifo("flags.txt")
    if nested:
        outer = tmp_path / "outer.txt"
        outer.write_text(f"--seed=3\n--flagfile={f}\n")
        f = outer
    line = _refused(run_cli("inspect", str(GOOD), f"--flagfile={f}"), error_line, "FIFO")
    assert "flags.txt" in line


def test_non_utf8_flagfile(run_cli, error_line, tmp_path):
    f = tmp_path / "flags.txt"
    f.write_bytes(b"--seed=3\n--out=\xff\xfe\n")
    line = error_line(run_cli("inspect", str(GOOD), f"--flagfile={f}"))
    assert str(f) in line and "not UTF-8" in line, line


def test_missing_flagfile(run_cli, error_line, tmp_path):
    line = error_line(run_cli("inspect", str(GOOD), f"--flagfile={tmp_path / 'nope'}"))
    assert "nope" in line and "cannot read" in line, line


def test_fifo_target_toml(run_cli, fifo, error_line):
    f = fifo("t.toml")
    _refused(run_cli("emulate", str(GOOD), f"--target={f}"), error_line, f)


def test_fifo_placement_plan(run_cli, fifo, error_line):
    f = fifo("plan.json")
    _refused(run_cli("place", "--target=npu", f"--placement={f}"), error_line, f)


def test_fifo_opt_input(run_cli, fifo, error_line):
    f = fifo("m.mlir")
    _refused(run_cli("opt", str(f)), error_line, f)


def test_fifo_place_workload(run_cli, fifo, error_line):
    f = fifo("w.npz")
    _refused(run_cli("place", str(f)), error_line, f)


def test_fifo_among_batch_inputs(run_cli, fifo, error_line, tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    shutil.copy(GOOD, d / "good.hlo")
    os.mkfifo(d / "pipe.hlo")
    p = run_cli("batch", f"--inputs={d}/*.hlo", f"--out={tmp_path / 'o'}", "--timeout_s=10",
                "--progress=none")
    _refused(p, error_line, "pipe.hlo")
