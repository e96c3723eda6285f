"""The parent's side of a worker process: one model at a time, guarded. A model that crashes
the worker, runs past ``--timeout_s`` or makes it use more than ``--memory_mb`` gets the worker
killed and a one-line reason; the next model gets a fresh worker.

A worker dies with its parent: a tiny launcher asks the kernel for SIGKILL on the parent's
death (``prctl(PR_SET_PDEATHSIG)``) before anything is imported, then checks the parent is
still the one that started it (if it died before the ``prctl``, the launcher exits). The
worker also inherits the job's folder lock, so while any worker of a job still runs, no other
job (a rerun after ``kill -9``) can take the folder.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Any

from ember_xla.batch.settings import JobSettings

POLL_S = 0.05
STARTUP_MIN_S = 120.0  # a worker's start (imports, warm-up) may take max(this, --timeout_s)
_PR_SET_PDEATHSIG = 1
LAUNCHER = f"""\
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl({_PR_SET_PDEATHSIG}, signal.SIGKILL, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the parent died before the prctl: nobody to work for
import runpy
runpy.run_module("ember_xla.batch.worker", run_name="__main__")
"""


class WorkerStartError(RuntimeError):
    by_signal = False  # the worker was killed by a signal while starting


def rss_mb(pid: int) -> float | None:
    """Resident memory of a process (Linux /proc), None where unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class WorkerProcess:
    def __init__(self, settings: JobSettings, log_path: str, tensorflow: bool,
                 inherit_fds: tuple[int, ...] = ()):
        self.settings = settings
        self.inherit_fds = inherit_fds
        self.log_path = log_path
        self.tensorflow = tensorflow
        self.proc: subprocess.Popen[bytes] | None = None
        self.died_by_signal = False  # how the last worker that died ended
        self._buf = b""
        self.starts = 0

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Start a worker; one killed by a signal while starting (from outside: the OOM
        killer, a stray ``kill``) is started once more before the job gives up."""
        try:
            self._start_once()
        except WorkerStartError as e:
            if not e.by_signal:
                raise
            self._start_once()

    def _start_once(self) -> None:
        self.died_by_signal = False
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        log = open(self.log_path, "ab")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"),
                   JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(os.getpid())],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, env=env, pass_fds=self.inherit_fds)
        finally:
            log.close()
        self.starts += 1
        self._buf = b""
        cfg = {"settings": self.settings.as_dict(), "tensorflow": self.tensorflow}
        self._send(cfg)
        got = self._receive(max(STARTUP_MIN_S, self.settings.timeout_s), 0)
        if "ready" not in got:
            self.kill()
            err = WorkerStartError(f"the batch worker did not start: {got.get('error')} "
                                   f"(log: {self.log_path})")
            err.by_signal = self.died_by_signal
            raise err

    def ensure_started(self) -> None:
        if not self.alive():
            self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                if f:
                    f.close()
            self.proc = None

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None and self.proc.stdin is not None
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    # -- one model ---------------------------------------------------------------------------
    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        """``{"status": "ok", "row": ...}`` or ``{"status": "failed", "error": ...}``."""
        self.ensure_started()
        self._send(task)
        return self._receive(self.settings.timeout_s, self.settings.memory_mb)

    def _send(self, obj: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the worker died; _receive reports how

    def _fail(self, error: str) -> dict[str, Any]:
        self.kill()
        return {"status": "failed", "error": error}

    def _receive(self, timeout_s: float, memory_mb: int) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    return self._fail(f"timed out after {timeout_s:g} s (--timeout_s); "
                                      "worker killed")
                if sel.select(min(POLL_S, left)):
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        return self._fail(self._death_reason())
                    self._buf += chunk
                    continue
                if memory_mb:
                    used = rss_mb(self.proc.pid) or 0.0
                    if used > memory_mb:
                        return self._fail(f"out of memory: the worker used {used:.0f} MB "
                                          f"(> --memory_mb={memory_mb}); worker killed")
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def _death_reason(self) -> str:
        assert self.proc is not None
        rc = self.proc.wait()
        self.died_by_signal = rc < 0
        log = os.path.relpath(self.log_path, self.settings.out)
        if rc < 0:
            why = f"the worker crashed ({_signal_name(rc)})"
            if rc == -signal.SIGKILL:
                why += " - killed from outside, e.g. by the system running out of memory"
        else:
            why = f"the worker exited with code {rc}"
        return f"{why}; see {log} in the output folder"
