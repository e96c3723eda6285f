"""Run the console script's entry point (``ember_xla.cli.run``, what the ``ember-xla`` script
calls) on many inputs fast: a fork server imports ember_xla, protobuf's HLO schema and jax once,
then forks one child per case with its own argv, stdout/stderr files, environment and a
timeout. The child is a fresh process as far as the CLI is concerned (absl flags unparsed, no
XLA client), so exit codes, signals, hangs and stderr are those a user would see."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass
class Outcome:
    code: int | None  # exit code, None if killed by a signal or hung
    signal: int | None
    hung: bool
    stdout: str
    stderr: str


class ForkRunner:
    def __init__(self) -> None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax  # noqa: F401  (import only; each child creates its own XLA client)

        import ember_xla.cli.main  # noqa: F401
        from ember_xla.hlo_import.proto import _hlo_pb2

        _hlo_pb2()
        self.tmp = tempfile.mkdtemp(prefix="ember-fuzz-")

    def run(self, argv: list[str], timeout: float = 60.0,
            env: dict[str, str] | None = None) -> Outcome:
        out_path, err_path = os.path.join(self.tmp, "out"), os.path.join(self.tmp, "err")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: become `ember-xla ARGV`
            code = 1
            try:
                fo = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                fe = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fo, 1)
                os.dup2(fe, 2)
                os.environ.update(env or {})
                sys.argv = ["ember-xla", *argv]
                from ember_xla.cli import run

                try:
                    run()
                    code = 0
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # what Python itself would do: print it, exit 1
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        deadline = time.monotonic() + timeout
        hung = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                hung, status = True, 0
                break
            time.sleep(0.005)
        with open(out_path, errors="replace") as f:
            out = f.read()
        with open(err_path, errors="replace") as f:
            err = f.read()
        if hung:
            return Outcome(None, None, True, out, err)
        if os.WIFSIGNALED(status):
            return Outcome(None, os.WTERMSIG(status), False, out, err)
        return Outcome(os.WEXITSTATUS(status), None, False, out, err)
