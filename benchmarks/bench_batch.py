"""Throughput of ``ember-xla batch`` (local runner): models per minute with 1 and 2 workers.

Builds the example fleet (ember_xla.examples.fleet: 51 small JAX/TF models as .pb, .hlo/.txt
and SavedModels) once, then runs the real console script on it into a fresh output folder per
run, alternating the worker counts, and reports medians. Two numbers per run: end to end
(the command's wall time, worker start-up with TensorFlow included) and the processing phase
(from the job's summary.json: the runner's elapsed time); and the CPU seconds the job used (all
its processes), which other load on the machine disturbs much less than wall time.

    PYTHONPATH=. python benchmarks/bench_batch.py [--rounds 3] [--actions rewrite,verify]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run(cmd: list[str], fleet: str, out: str, workers: int,
        actions: str) -> tuple[float, float, float]:
    shutil.rmtree(out, ignore_errors=True)
    cpu0 = _cpu()
    t0 = time.perf_counter()
    p = subprocess.run(cmd + ["batch", f"--inputs={fleet}/*", f"--out={out}",
                              f"--workers={workers}", f"--actions={actions}", "--progress=none"],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"batch failed ({p.returncode}): {p.stderr[-2000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        doc = json.load(f)
    return wall, doc["run"]["elapsed_s"], _cpu() - cpu0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--actions", default="rewrite,verify")
    ap.add_argument("--fleet", default=None, help="existing fleet folder (default: build one)")
    a = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    work = tempfile.mkdtemp(prefix="bench_batch_")
    fleet = a.fleet
    if fleet is None:
        from ember_xla.examples.fleet import make_fleet

        fleet = os.path.join(work, "fleet")
        make_fleet(fleet)
    n = len(os.listdir(fleet))
    cmd = [sys.executable, "-c", "from ember_xla.cli import run; run()"]
    res: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    for r in range(a.rounds):
        for w in (1, 2):
            wall, proc, cpu = run(cmd, fleet, os.path.join(work, "out"), w, a.actions)
            res[w].append((wall, proc, cpu))
            print(f"round {r + 1} workers {w}: {wall:.1f} s end to end, {proc:.1f} s processing,"
                  f" {cpu:.1f} CPU s (load average {os.getloadavg()[0]:.1f})", flush=True)
    print(f"\n{n} models, actions {a.actions}, {a.rounds} rounds, medians:")
    print("workers  end-to-end s  models/min  processing s  models/min  CPU s  CPU s/model")
    med = {}
    for w, xs in res.items():
        wall, proc, cpu = (statistics.median(x[i] for x in xs) for i in range(3))
        med[w] = (wall, proc)
        print(f"{w:7d}  {wall:12.1f}  {60 * n / wall:10.1f}  {proc:12.1f}  {60 * n / proc:10.1f}"
              f"  {cpu:5.1f}  {cpu / n:11.2f}")
    print(f"2 workers vs 1: {med[1][0] / med[2][0]:.2f}x end to end, "
          f"{med[1][1] / med[2][1]:.2f}x processing")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
