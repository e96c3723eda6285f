"""``util.atomic``: a symlinked target is replaced through the link, a dangling one refused; an
old result that cannot be deleted (chattr +i) is refused before anything is written; staging
left by a dead run is removed by the next write; I/O errors name their path."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ember_xla.util.atomic import (
    STAGING_MARK,
    TEMP_MARK,
    OutputRefused,
    remove_stale,
    write_atomic,
    write_folder_atomic,
)

OLD = {"a.txt": "old a", "sub/b.txt": "old b"}
NEW = {"a.txt": "new a", "sub/b.txt": "new b", "c.txt": "new c"}


def _tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


def _hidden(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.startswith("."))


def test_symlinked_folder_is_replaced_through_the_link(tmp_path):
    real = tmp_path / "real"
    write_folder_atomic(str(real), OLD)
    link = tmp_path / "link"
    link.symlink_to(real)
    write_folder_atomic(str(link), NEW)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert _tree(real) == NEW
    assert _hidden(tmp_path) == []


def test_symlinked_file_is_replaced_through_the_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(str(link), "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert _hidden(tmp_path) == []


def test_dangling_link_is_refused(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputRefused, match="does not exist"):
        write_folder_atomic(str(link), NEW)
    assert sorted(os.listdir(tmp_path)) == ["link"]


def test_file_where_a_folder_goes_is_refused(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(OutputRefused, match="not a folder"):
        write_folder_atomic(str(tmp_path / "out"), NEW)
    assert sorted(os.listdir(tmp_path)) == ["out"]


def _chattr(flag: str, path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    p = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"this filesystem has no inode flags (chattr: {p.stderr.strip()})")


@pytest.mark.parametrize("which", ["sub/b.txt", "sub", "."])
@pytest.mark.parametrize("flag", ["+i", "+a"])
def test_undeletable_old_result_is_refused_untouched(tmp_path, which, flag):
    out = tmp_path / "out"
    write_folder_atomic(str(out), OLD)
    target = out / which
    _chattr(flag, target)
    try:
        with pytest.raises(OutputRefused, match=str(target.resolve()).rstrip("/.")):
            write_folder_atomic(str(out), NEW)
    finally:
        subprocess.run(["chattr", "-i", "-a", str(target)], check=True)
    assert _tree(out) == OLD
    assert _hidden(tmp_path) == []


def test_stale_staging_of_a_dead_run_is_removed(tmp_path):
    dead = tmp_path / f".out{STAGING_MARK}999999999-1-0123abcd"
    dead_old = tmp_path / f".out{STAGING_MARK}999999999-1-0123abcd.old"
    dead_tmp = tmp_path / f".out{TEMP_MARK}999999999-1-0123abcd"
    for d in (dead, dead_old):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "x").write_text("half")
    dead_tmp.write_text("half")
    with open(f"/proc/{os.getpid()}/stat") as f:
        start = f.read().rsplit(")", 1)[-1].split()[19]
    alive = tmp_path / f".out{STAGING_MARK}{os.getpid()}-{start}-0123abcd"
    alive.mkdir()
    other = tmp_path / f".other{STAGING_MARK}999999999-1-0123abcd"
    other.mkdir()
    write_folder_atomic(str(tmp_path / "out"), NEW)
    assert _tree(tmp_path / "out") == NEW
    assert not dead.exists() and not dead_old.exists() and not dead_tmp.exists()
    assert alive.exists() and other.exists()  # a live run's, and another target's
    assert remove_stale(str(tmp_path), "other") == [str(other)]


def test_stale_temp_file_is_removed_by_write_atomic(tmp_path):
    dead = tmp_path / f".r.json{TEMP_MARK}999999999-1-0123abcd"
    dead.write_text("half")
    write_atomic(str(tmp_path / "r.json"), "{}")
    assert _hidden(tmp_path) == []


@pytest.mark.parametrize("how", ["file", "folder"])
def test_io_error_names_the_path(tmp_path, how):
    """A real write error: the file-size limit (RLIMIT_FSIZE) turns a big write into EFBIG, as a
    full disk's ENOSPC, neither of which names a file by itself."""
    out = tmp_path / ("big.bin" if how == "file" else "out")
    call = (f"write_atomic({str(out)!r}, b'x' * 200000)" if how == "file" else
            f"write_folder_atomic({str(out)!r}, {{'a': b'x', 'b/big': b'x' * 200000}})")
    code = textwrap.dedent(f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        from ember_xla.util.atomic import write_atomic, write_folder_atomic
        try:
            {call}
        except OSError as e:
            print(str(e))
        """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "File too large" in p.stdout and str(tmp_path) in p.stdout, p.stdout
    assert os.listdir(tmp_path) == []
