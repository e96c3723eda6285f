"""Memory and bandwidth floors of benchmarks/bench_train.py: each variant's peak resident set
(measured alone in a fresh process), the numpy copy floor of a step that is not donated, and
XLA:CPU writing new tables into fresh output buffers, and the page faults of a step (the first
touch of memory mapped anew for it)."""

from __future__ import annotations

import os
import sys

import numpy as np
from bench_embedding import BLOCK
from train_variants import make_variant


def faults(run, steps: int = 3) -> tuple[float, float]:
    """(minor page faults, system CPU ms) per step of ``run`` (warm), this process: what the
    first writes into freshly mapped buffers cost (the kernel maps and zeroes each page)."""
    import resource

    run()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(steps):
        run()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (r1.ru_minflt - r0.ru_minflt) / steps, (r1.ru_stime - r0.ru_stime) * 1e3 / steps


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRss:
    """While alive, a thread samples the resident set every millisecond; ``peak`` is the
    highest sample (and the last reading) over the resident set when it started."""

    def __enter__(self) -> PeakRss:
        import threading

        self.base, self.top, self._stop = rss(), 0, threading.Event()

        def sample() -> None:
            while not self._stop.wait(0.001):
                self.top = max(self.top, rss())
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.top = max(self.top, rss())

    @property
    def peak(self) -> int:
        return self.top - self.base


def peak_rss_child(args, data, optimizer: str, name: str) -> None:
    """In a fresh process: build one variant (its one-step check outputs dropped), then run it
    BLOCK times while a thread samples the resident set every millisecond; print the peak
    over the resident set once the shared numpy data exist and the frameworks are imported
    (the variant's own copy of the tables and state, its compiled code and every step's
    buffers count; what building it needed transiently does not)."""
    import gc

    import fbgemm_gpu  # noqa: F401  (imported before the base, like jax and torch)

    import ember_xla.rewrites.pipeline  # noqa: F401
    import ember_xla.runtime.execute  # noqa: F401

    base = rss()
    run, _, outs = make_variant(args, data, optimizer, name)
    del outs
    gc.collect()
    with PeakRss() as p:
        for _ in range(BLOCK):
            run()
    print(f"PEAK {p.top - base}")


def peak_rss(argv: list[str], optimizer: str, name: str) -> float | None:
    import subprocess

    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_train.py")
    out = subprocess.run([sys.executable, bench, *argv, "--optimizers", optimizer, "--rss_of",
                          name], capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("PEAK "):
            return int(line.split()[1]) / 2**30
    return None


def copy_bytes(data, optimizer: str) -> int:
    """The bytes of the tables (and rowwise slots) a step that is not donated writes anew."""
    rows, tables = data[0], data[1]
    return sum(t.nbytes for t in tables) + (0 if optimizer == "sgd" else sum(rows) * 4)


def copy_floor(data, optimizer: str, threads: int = 1):
    """A numpy copy of every table (and rowwise slot) into preallocated arrays: the bytes a
    step without donation must write (and read) at least; with ``threads`` > 1 each array is
    cut into that many parts copied by as many threads (np.copyto releases the GIL), so the
    copy runs at what all cores together get from memory. Returns (run, bytes copied)."""
    import threading

    rows, tables = data[0], data[1]
    src = list(tables) + ([] if optimizer == "sgd" else [np.zeros(n, np.float32) for n in rows])
    dst = [np.empty_like(a) for a in src]
    parts = []
    for d, a in zip(dst, src, strict=True):
        d, a = d.reshape(-1), a.reshape(-1)
        cuts = [d.size * i // threads for i in range(threads + 1)]
        parts.append([(d[lo:hi], a[lo:hi]) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)])

    def part(i: int) -> None:
        for p in parts:
            np.copyto(*p[i])

    def run():
        others = [threading.Thread(target=part, args=(i,)) for i in range(1, threads)]
        for t in others:
            t.start()
        part(0)
        for t in others:
            t.join()

    run()  # touch the destination pages once
    return run, sum(a.nbytes for a in src)


def xla_new_tables(data, optimizer: str):
    """XLA:CPU writing new tables (and slots) of the same shapes, ``-t`` each (an op it cannot
    elide): the floor of any XLA step that is not donated, its output allocation included."""
    import jax

    rows, tables = data[0], data[1]
    src = list(tables) + ([] if optimizer == "sgd" else [np.zeros(n, np.float32) for n in rows])
    src = [jax.device_put(a) for a in src]
    neg = jax.jit(lambda xs: [-x for x in xs])

    def run():
        return jax.block_until_ready(neg(src))
    return run
