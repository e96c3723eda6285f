"""``pip install -e .`` really works: in a fresh venv, an editable install of a copy of this
source tree finds its compiled kernels (installed into site-packages while the Python files stay
in the source tree) and runs the built-in rewritten example with outputs equal to XLA's.

Cost: ~45 s on the 2-core CI machine (venv creation ~5 s, CMake build of the kernels ~35 s,
the example ~8 s). The fresh venv sees the running environment's packages (jax, tensorflow,
scikit-build-core, jaxlib's FFI headers) through a ``.pth`` file, so nothing is downloaded;
the build runs with ``--no-build-isolation`` against them. The editable finder that
scikit-build-core installs sits first on ``sys.meta_path``, so ``ember_xla`` is imported from
the copied source tree (checked), not from the running environment's regular install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".git", ".ci-venv", "build", "dist", "__pycache__", "*.so",
                              ".pytest_cache", ".ruff_cache", "tests", "*.egg-info")

CHECK = """
import sys
from pathlib import Path
import ember_xla, ember_xla.native as native
src, site = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
assert Path(ember_xla.__file__).resolve().is_relative_to(src), ember_xla.__file__
lib = native.library_path()
assert lib.is_relative_to(site), f"library at {lib}, expected under {site}"
native.register_targets()
from ember_xla.emulator import cc_library
emu = cc_library.library_path()
assert emu.is_relative_to(site) and emu.is_file(), f"emulator library at {emu}"
print("library", lib)
"""


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "EMBER_XLA_NATIVE_LIBRARY", "VIRTUAL_ENV", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


def _run(cmd: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=_clean_env(), capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_editable_install_finds_kernels_and_runs_example(tmp_path):
    try:
        import scikit_build_core  # noqa: F401 - the build backend, needed without isolation
    except ImportError:
        pytest.skip("scikit-build-core is not installed (it is in the [test] extra)")
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not on PATH: cannot build the kernels")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 120)
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp_path, 60).stdout.strip())
    # The running environment's packages, after the venv's own (and after the editable finder).
    (site / "zz_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
          "-e", str(src)], tmp_path, 900)
    assert not (src / "ember_xla" / "native" / "libember_kernels.so").exists()
    r = _run([str(py), "-c", CHECK, str(src), str(site)], tmp_path, 300)
    assert "library" in r.stdout
    r = _run([str(venv / "bin" / "ember-xla"), "example", "--notf", "--out",
              str(tmp_path / "out")], tmp_path, 600)
    assert "outputs bitwise equal: True" in r.stdout, r.stdout
    assert "clusters rewritten" in r.stdout
