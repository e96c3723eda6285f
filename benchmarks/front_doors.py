"""Every speed goal of the front doors in one command: the 26-table stage as ``ember-xla
rewrite`` writes it vs XLA:CPU and vs torch (medians of 3 process runs), the 8-table model at
B=256, the batch sweep, the idiom corpus, ``ember_xla.jit`` vs ``jax.jit`` at B=1, 64 and
1024 with the per-call overhead, and ``ember_xla.embedding_bag`` against the JAX code it
replaces. Each benchmark runs in its own process, one after the other,
with the load average printed before and after it; its full output is passed through, and the
lines that carry a goal's ratio are repeated at the end. A benchmark driver, not a test.

    cd /tmp && python /path/to/benchmarks/front_doors.py   # everything (~6 min at load 5-10)
    python benchmarks/front_doors.py --quick                # fewer reps (a smoke run)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# (name, script and arguments, full run's extra arguments, quick run's, goal lines' prefixes)
RUNS = [
    ("26-table stage, no flags, vs XLA:CPU and torch", "bench_embedding.py",
     ["--max-rows", "200000", "--reps", "11", "--processes", "3"],
     ["--max-rows", "200000", "--reps", "5", "--processes", "1"],
     ("  ember_vs_xla", "  ember_vs_torch", "  separate_vs_xla", "  every run")),
    ("8-table model, B=256, D=16", "bench_call_decision.py",
     ["--batch", "256", "--reps", "200"], ["--batch", "256", "--reps", "40"],
     ("decision:", "| ")),
    ("batch sweep", "bench_embedding.py", ["--sweep", "--reps", "9", "--max-rows", "200000"],
     ["--sweep", "--reps", "3", "--max-rows", "200000"],
     ("rows below", "| B=")),
    ("idiom corpus", "bench_idioms.py", ["--reps", "15"], ["--reps", "5"],
     ("rows below", "| ")),
    ("ember_xla.jit vs jax.jit", "bench_jit.py", ["--rounds", "31", "--train-batch", "0"],
     ["--rounds", "9", "--train-batch", "0"], ("B=", "  jax.jit", "  ember_xla.jit", "  speedup")),
    ("ember_xla.embedding_bag vs the JAX code it replaces", "bench_embedding_bag.py",
     ["--rounds", "21"], ["--rounds", "5"], ("rows below", "| offsets", "| padded")),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    ap.add_argument("--only", nargs="*", type=int, default=None,
                    help="run only these benchmarks (0-based positions in the list)")
    args = ap.parse_args(argv)
    summary: list[str] = []
    failed = 0
    for i, (name, script, full, quick, keys) in enumerate(RUNS):
        if args.only is not None and i not in args.only:
            continue
        cmd = [sys.executable, str(HERE / script), *(quick if args.quick else full)]
        head = (f"=== [{i}] {name}: {' '.join(['python', 'benchmarks/' + script] + cmd[2:])}; "
                f"load average {os.getloadavg()[0]:.2f}")
        print(head, flush=True)
        t0 = time.monotonic()
        p = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, check=False)
        sys.stdout.write(p.stdout)
        if p.returncode:
            failed += 1
            sys.stdout.write(p.stderr[-3000:])
        tail = (f"=== [{i}] exit {p.returncode}, {time.monotonic() - t0:.0f} s; load average "
                f"{os.getloadavg()[0]:.2f}")
        print(tail, flush=True)
        summary += [head] + [ln for ln in p.stdout.splitlines() if ln.startswith(keys)] + [tail]
    print("\n#### goal lines\n" + "\n".join(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
