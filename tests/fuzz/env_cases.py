"""Fuzz cases about the environment rather than the input's bytes: special files wherever a
path is read (FIFOs, sockets, devices as MODEL, ``--inputs``, ``--flagfile``, ``--target``),
symlinked, dangling and immutable ``--out`` folders, staging folders a killed run left, and
SIGKILL of a ``batch`` job's parent or of one of its workers. Each returns ``(kind, failure or
None, argv, stderr)``; the campaign counts and reports them like the mutation cases."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Result = tuple[str, str | None, list[str], str]
STALE = ".outdir.ember-new-999999999-1-deadbeef"


def _one_error_line(o: Any) -> str | None:
    if o.hung:
        return "hang"
    if o.signal is not None:
        return f"signal {o.signal}"
    if "Traceback" in o.stderr:
        return "traceback"
    lines = o.stderr.strip().splitlines()
    if o.code != 2 or len(lines) != 1 or not lines[0].startswith("ember-xla: error: "):
        return f"not one error line (exit {o.code})"
    return None


def _hidden(work: Path) -> list[str]:
    return sorted(n for n in os.listdir(work) if n.startswith(".outdir"))


def special_file(rng: random.Random, runner: Any, work: Path, model: Path) -> Result:
    """A FIFO, socket or device where a path is read: one error line, no hang."""
    kind = rng.choice(["fifo", "socket", "/dev/null", "/dev/zero"])
    where = rng.choice(["model", "inputs", "flagfile", "target"])
    path = work / f"special{rng.randrange(10**6)}"
    sock = None
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    else:
        path = Path(kind)
    argv = {"model": [rng.choice(["inspect", "rewrite", "run", "lower"]), str(path)],
            "inputs": ["run", str(model), f"--inputs={path}"],
            "flagfile": ["inspect", str(model), f"--flagfile={path}"],
            "target": ["emulate", str(model), f"--target={path}"]}[where]
    if argv[0] == "rewrite":
        argv += ["--out", str(work / "special_out")]
    try:
        o = runner.run(argv, timeout=30)
    finally:
        if sock is not None:
            sock.close()
        if kind in ("fifo", "socket"):
            path.unlink()
    why = _one_error_line(o)
    if why is None and (work / "special_out").exists():
        why = "output written on error"
    return f"special {kind} as {where}", why, argv, o.stderr


def symlinked_out(rng: random.Random, runner: Any, work: Path, model: Path, old: Path,
                  snapshot: Callable[[Path], dict | None]) -> Result:
    """``--out`` is a link to the old result (replaced through it) or a dangling link."""
    real, link = work / "linked_real", work / "outdir"
    shutil.rmtree(real, ignore_errors=True)
    shutil.rmtree(link, ignore_errors=True)
    dangling = rng.random() < 0.3
    if not dangling:
        shutil.copytree(old, real)
    link.symlink_to(real)
    argv = ["rewrite", str(model), "--out", str(link)]
    try:
        o = runner.run(argv, timeout=120)
        if dangling:
            why = _one_error_line(o) or (None if not real.exists() else "dangling link filled")
        elif o.code != 0:
            why = f"exit {o.code}"
        elif not link.is_symlink() or sorted(snapshot(real) or {}) != sorted(snapshot(old)):
            why = "link replaced or target incomplete"
        else:
            why = None
        if why is None and _hidden(work):
            why = f"leftover {_hidden(work)}"
    finally:
        link.unlink()
        shutil.rmtree(real, ignore_errors=True)
    return f"symlinked out{' (dangling)' if dangling else ''}", why, argv, o.stderr


def immutable_out(rng: random.Random, runner: Any, work: Path, model: Path, old: Path,
                  snapshot: Callable[[Path], dict | None]) -> Result | None:
    """One old output file made immutable: refused up front, old result untouched."""
    if shutil.which("chattr") is None:
        return None
    out = work / "outdir"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(old, out)
    victim = out / rng.choice(sorted(os.listdir(out)))
    if subprocess.run(["chattr", "+i", str(victim)], capture_output=True).returncode:
        shutil.rmtree(out)
        return None
    before = snapshot(out)
    argv = ["rewrite", str(model), "--out", str(out)]
    try:
        o = runner.run(argv, timeout=120)
        why = _one_error_line(o)
        if why is None and snapshot(out) != before:
            why = "output folder changed on error"
        if why is None and _hidden(work):
            why = f"leftover {_hidden(work)}"
    finally:
        subprocess.run(["chattr", "-i", str(victim)], check=True)
        shutil.rmtree(out, ignore_errors=True)
    return "immutable old output", why, argv, o.stderr


def stale_staging(rng: random.Random, runner: Any, work: Path, model: Path) -> Result:
    """A staging folder of a dead run next to ``--out``: the next rewrite removes it."""
    stale = work / STALE
    stale.mkdir(exist_ok=True)
    (stale / "report.json").write_text("half")
    out = work / "outdir"
    shutil.rmtree(out, ignore_errors=True)
    argv = ["rewrite", str(model), "--out", str(out)]
    o = runner.run(argv, timeout=120)
    why = None if o.code == 0 else f"exit {o.code}"
    if why is None and _hidden(work):
        why = f"leftover {_hidden(work)}"
    shutil.rmtree(stale, ignore_errors=True)
    return "stale staging", why, argv, o.stderr


def children(pid: int) -> set[int]:
    """The live (not zombie) child processes of ``pid`` (Linux /proc)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.add(int(d))
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def batch_kill(rng: random.Random, work: Path, models: list[Path]) -> Result:
    """SIGKILL a batch job's parent (no worker may survive it) or one of its workers (the model
    fails in one line, the job goes on); then the rerun completes with no staging left."""
    import ember_xla

    d = work / "batch_models"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    for m in rng.sample(models, min(3, len(models))):
        shutil.copy(m, d / m.name)
    out = work / "batch_out"
    shutil.rmtree(out, ignore_errors=True)
    victim = rng.choice(["parent", "worker"])
    env = dict(os.environ, PYTHONPATH=str(Path(ember_xla.__file__).resolve().parents[1]),
               EMBER_XLA_COST_MODEL="off", TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, "-c", "from ember_xla.cli import run; run()", "batch",
           f"--inputs={d}/*", f"--out={out}", "--workers=2", "--progress=none",
           "--timeout_s=120"]
    argv = cmd[3:] + [f"(kill {victim})"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=env)
    seen: set[int] = set()
    t_end = time.monotonic() + 300
    while not seen and p.poll() is None and time.monotonic() < t_end:
        seen |= children(p.pid)
        time.sleep(0.01)
    t_end = time.monotonic() + rng.uniform(0, 6)
    while p.poll() is None and time.monotonic() < t_end:
        seen |= children(p.pid)
        time.sleep(0.02)
    why = None
    if victim == "parent":
        p.kill()
        p.wait()
        deadline = time.monotonic() + 5
        while any(alive(w) for w in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        orphans = [w for w in seen if alive(w)]
        for w in orphans:
            os.kill(w, signal.SIGKILL)
        if orphans:
            why = f"{len(orphans)} orphan worker(s)"
    else:
        for w in list(seen):
            if alive(w):
                os.kill(w, signal.SIGKILL)
                break
        try:
            p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            why = "hang after a worker was killed"
        if why is None and p.returncode not in (0, 1):
            why = f"batch exit {p.returncode} after a worker was killed"
    stderr = p.stderr.read() if p.stderr else ""
    if p.stderr:
        p.stderr.close()
    if why is None:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        staging = out / ".staging"
        if r.returncode != 0:
            why, stderr = f"rerun exit {r.returncode}", r.stderr
        elif staging.exists() and os.listdir(staging):
            why = "staging left after the rerun"
    return f"batch kill {victim}", why, argv, stderr[-600:]
