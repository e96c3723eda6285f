"""Both native libraries under AddressSanitizer and UndefinedBehaviorSanitizer (the CMake
option ``EMBER_SANITIZE``): build them into a scratch folder, run the tests that drive native
code (kernels, grouped/multi kernels, gradient and fused-optimizer kernels, the summation
orders of padded bags, NaN/Inf and random differential cases, the emulator's core, its
multi-core machine and FFI target, the program parser fed malformed programs, the fuzzer's CI
campaign through the CLI) against them, and require 0 reports.
Slow: the build alone takes minutes. The command is in docs/RELIABILITY.md."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBSET = ["tests/native/test_kernels.py", "tests/native/test_grouped.py",
          "tests/native/test_multi.py", "tests/native/test_table_pages.py",
          "tests/rewrites/test_nan_inf.py", "tests/emulator/test_fast.py",
          "tests/emulator/test_fast_program.py", "tests/emulator/test_fast_ffi.py",
          "tests/native/test_embedding_grad.py", "tests/rewrites/test_fuse_optimizer.py",
          "tests/native/test_padded_minmax.py", "tests/native/test_buffer_cache.py",
          "tests/rewrites/test_padded_order.py", "tests/rewrites/test_differential.py",
          "tests/emulator/test_fast_random.py", "tests/emulator/test_cores.py",
          "tests/fuzz/test_fuzz.py",
          # counts transparent huge pages of jax's buffers, which ASan's allocator maps
          # differently (71 MB huge under it, 0 without): a property of the allocator
          "--deselect", "tests/native/test_table_pages.py::"
                        "test_one_call_small_tables_and_mode_off_leave_pages_alone"]


def _runtime(name: str) -> str:
    path = subprocess.run(["c++", f"-print-file-name={name}"], capture_output=True,
                          text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else ""


@pytest.mark.slow
def test_native_code_under_asan_and_ubsan(tmp_path):
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        pytest.skip("needs cmake and a C++ compiler")
    asan, stdcpp = _runtime("libasan.so"), _runtime("libstdc++.so")
    if not asan or not stdcpp:
        pytest.skip("the compiler has no ASan runtime (libasan.so)")
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DEMBER_SANITIZE=ON",
                    f"-DPython_EXECUTABLE={sys.executable}"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j2"], check=True, capture_output=True)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = dict(os.environ,
               # libstdc++ first-hand: else ASan cannot find the real __cxa_throw (Python
               # itself does not link it) and the first C++ exception aborts
               LD_PRELOAD=f"{asan}:{stdcpp}",
               ASAN_OPTIONS=f"detect_leaks=0:abort_on_error=1:log_path={logs}/asan",
               UBSAN_OPTIONS=f"print_stacktrace=1:halt_on_error=1:log_path={logs}/ubsan",
               EMBER_XLA_NATIVE_LIBRARY=str(build / "libember_kernels.so"),
               EMBER_XLA_EMULATOR_LIBRARY=str(build / "libember_emulator.so"))
    # no "-q": the project's addopts pass one already, and a second drops the summary line
    # whose count is checked below
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                        *SUBSET], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=4 * 3600)
    reports = sorted(os.listdir(logs))
    text = "\n".join((logs / r).read_text()[:3000] for r in reports[:3])
    assert not reports, text
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    ran = re.search(r"(\d+) passed", p.stdout)
    assert ran and int(ran.group(1)) > 100, p.stdout[-2000:]
