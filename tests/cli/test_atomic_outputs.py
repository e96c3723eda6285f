"""``rewrite`` replaces its output folder as a whole: SIGKILL at any point (before, between and
after the file writes, announced by the EMBER_XLA_TEST_PAUSE_WRITES hook) leaves the complete
old result or the complete new one; a refused output writes nothing; files respect the umask."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "rewrites" / "fixtures"
OLD = FIXTURES / "jax_gnn_segment_max.hlo"
NEW = FIXTURES / "jax_index_segment_min.hlo"


def _cmd():
    script = Path(sys.executable).with_name("ember-xla")
    return [str(script)] if script.exists() else [
        sys.executable, "-c", "from ember_xla.cli import run; run()"]


def _env(**kw):
    import ember_xla

    home = str(Path(ember_xla.__file__).resolve().parents[1])
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=home, **kw)


def _files(d: Path):
    return {f: (d / f).read_bytes() for f in sorted(os.listdir(d))}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    base = tmp_path_factory.mktemp("atomic")
    out = {}
    for name, src in (("old", OLD), ("new", NEW)):
        subprocess.run(_cmd() + ["rewrite", str(src), "--out", str(base / name)], check=True,
                       env=_env(), capture_output=True, cwd=tempfile.gettempdir())
        out[name] = _files(base / name)
    assert out["old"] != out["new"]
    return out


def _kill_after(out: Path, step: int, pause: str = "2"):
    """Start `rewrite NEW --out out` with the pause hook; SIGKILL it after ``step`` hook lines
    (0: before the first write)."""
    p = subprocess.Popen(_cmd() + ["rewrite", str(NEW), "--out", str(out)],
                         env=_env(EMBER_XLA_TEST_PAUSE_WRITES=pause), stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True, cwd=tempfile.gettempdir())
    seen = 0
    while seen < step:
        line = p.stderr.readline()
        if not line:
            break
        seen += "test hook:" in line
    p.send_signal(signal.SIGKILL)
    p.wait()
    return seen


@pytest.mark.parametrize("step", [1, 2, 3, 4])
def test_sigkill_between_writes_leaves_old_or_new(results, tmp_path, step):
    out = tmp_path / "out"
    shutil.copytree(_old_dir(results, tmp_path), out)
    seen = _kill_after(out, step)
    assert seen == step  # 3 files, then the swap: 4 points
    got = _files(out)
    assert got in (results["old"], results["new"]), sorted(got)
    if step == 4:  # killed after the swap: the new result is complete
        assert got == results["new"]
    else:
        assert got == results["old"]


def _old_dir(results, tmp_path):
    d = tmp_path / "old_src"
    d.mkdir()
    for k, v in results["old"].items():
        (d / k).write_bytes(v)
    return d


def test_kill_before_any_write_into_new_folder(results, tmp_path):
    out = tmp_path / "fresh"
    _kill_after(out, 2)
    assert not out.exists()  # never a partial folder under the target name


def test_outputs_respect_umask(tmp_path, cli):
    out = tmp_path / "o"
    old = os.umask(0o027)
    try:
        p = cli("rewrite", str(OLD), "--out", str(out))
    finally:
        os.umask(old)
    assert p.returncode == 0, p.stderr
    for f in ("rewritten.pb", "rewritten.hlo", "report.json"):
        assert (out / f).stat().st_mode & 0o777 == 0o640, f
    assert out.stat().st_mode & 0o777 == 0o750


def test_foreign_files_are_not_replaced(tmp_path, cli):
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    p = cli("rewrite", str(OLD), "--out", str(out))
    assert p.returncode == 2 and "notes.txt" in p.stderr and "Traceback" not in p.stderr
    assert sorted(os.listdir(out)) == ["notes.txt"]


def test_output_refused_after_rewrite_writes_nothing(results, tmp_path, cli):
    """A layout field the proto reader accepts but the text printer cannot spell: before, a new
    rewritten.pb was written beside the old report; now the error comes before any write."""
    from tensorflow.compiler.xla.service import hlo_pb2

    from ember_xla.hlo.parser import parse_module
    from ember_xla.hlo_import.proto import module_to_proto

    msg = hlo_pb2.HloModuleProto()
    msg.ParseFromString(module_to_proto(parse_module(NEW.read_text())))
    msg.computations[-1].instructions[0].shape.layout.tail_padding_alignment_in_elements = 3
    bad = tmp_path / "tail.pb"
    bad.write_bytes(msg.SerializeToString())
    out = _old_dir(results, tmp_path)
    p = cli("rewrite", str(bad), "--out", str(out))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().count("\n") == 0 and str(bad) in p.stderr
    assert _files(out) == results["old"]


def test_staging_of_a_killed_run_is_removed_by_the_next(results, tmp_path, cli):
    out = tmp_path / "out"
    shutil.copytree(_old_dir(results, tmp_path), out)
    assert _kill_after(out, 2) == 2
    assert [n for n in os.listdir(tmp_path) if ".ember-new-" in n]  # the killed run's
    p = cli("rewrite", str(OLD), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []
    assert _files(out) == results["old"]


def test_symlinked_out_replaces_the_link_target(results, tmp_path, cli):
    real = _old_dir(results, tmp_path)
    link = tmp_path / "link"
    link.symlink_to(real)
    p = cli("rewrite", str(NEW), "--out", str(link))
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and _files(real) == results["new"]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


def test_immutable_old_file_refused_before_work(results, tmp_path, cli, error_line):
    out = _old_dir(results, tmp_path)
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(out / "report.json")]).returncode:
        pytest.skip("no chattr or no inode flags on this filesystem")
    try:
        line = error_line(cli("rewrite", str(NEW), "--out", str(out)))
    finally:
        subprocess.run(["chattr", "-i", str(out / "report.json")], check=True)
    assert "report.json" in line and "immutable" in line
    assert _files(out) == results["old"]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


@pytest.mark.slow
def test_hundred_sigkills_of_rewrite(results, tmp_path, cli):
    """100 kills at a random hook step (before the first write, between writes, after the
    swap) alternating old and new inputs over one folder: the folder is always the complete
    old or new result, and after a final run no staging folder is left."""
    import random

    rng = random.Random(5)
    out = tmp_path / "out"
    shutil.copytree(_old_dir(results, tmp_path), out)
    kills = 0
    for _ in range(100):
        step = rng.randrange(0, 5)
        assert _kill_after(out, step, pause="0.3") == step
        kills += 1
        got = _files(out) if out.exists() else None
        assert got in (results["old"], results["new"]), sorted(got or {})
    assert kills == 100
    p = cli("rewrite", str(OLD), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert _files(out) == results["old"]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


def test_an_unwritable_out_is_refused_before_work(tmp_path, cli, error_line):
    """Where no folder can be made (root may "write" /proc by its permissions), the command
    says so in one line; so does a path below a file."""
    (tmp_path / "f").write_text("")
    for out, say in (("/proc/nope", "cannot write in /proc"),
                     (str(tmp_path / "f" / "o"), "exists and is not a folder")):
        line = error_line(cli("rewrite", str(OLD), "--out", out))
        assert say in line, line
