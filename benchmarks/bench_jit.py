"""``ember_xla.jit`` against ``jax.jit`` on a flax DLRM-like model served in a loop, and on its
training step (tables donated).

A benchmark, not a test. The model (flax.linen): 4 ``nn.Embed`` tables (rows 100000, 20000,
5000, 1000; D=32, f32), multi-hot bags as padded ids ``[B, P]`` (P = 8, 4, 12, 2) summed over
the bag, 13 dense features through a bottom MLP, everything concatenated into a top MLP: 14
parameter arrays + 5 inputs = 19 arguments per call. Served at B = 1, 64 and 1024: the
parameters live on the device (as a server keeps them), each call gets the batch as numpy
arrays (as a request brings it).

For every batch size, in one process, ``jax.jit(model)`` and ``ember_xla.jit(model)``
alternate (``--rounds`` rounds; in each, every variant runs blocks of at least ``--calls``
calls and about 2.5 ms in one order and then in the reverse order, the order rotated every
round, after untimed warm-up calls): the call times are medians of the per-round means, the
speedup is the median of the per-round ratios with its 95% confidence interval, beside the
same ratio between two ``jax.jit`` of the same function (one program: the measurement's
noise). The per-call overhead is timed the same way on a function that takes the same 19
arguments (``keep_unused=True``, so every one is transferred or passed through) and returns
one of them: what the dispatch costs beyond the program. One call of each
is compared bit for bit before timing (the largest difference printed if any). The training
row: ``value_and_grad`` of an MSE loss and an SGD update of every parameter,
``donate_argnums=0``; each variant consumes its own previous
output (a training loop), the two compared bit for bit on the first step.

    python benchmarks/bench_jit.py                  # B = 1, 64, 1024 and the training row
    python benchmarks/bench_jit.py --batches 64 --rounds 31 --train-batch 0
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

ROWS, POOL, DIM, DENSE = (100_000, 20_000, 5_000, 1_000), (8, 4, 12, 2), 32, 13


def build_model():
    import flax.linen as nn
    import jax.numpy as jnp

    class DLRM(nn.Module):
        @nn.compact
        def __call__(self, dense, *bags):
            x = nn.relu(nn.Dense(64)(dense))
            x = nn.relu(nn.Dense(DIM)(x))
            pooled = [nn.Embed(n, DIM, name=f"emb{i}")(ids).sum(1)
                      for i, (n, ids) in enumerate(zip(ROWS, bags, strict=True))]
            z = jnp.concatenate([x, *pooled], axis=1)
            z = nn.relu(nn.Dense(64)(z))
            return nn.Dense(1)(z)[:, 0]

    return DLRM()


def batch(rng: np.random.Generator, b: int) -> tuple[np.ndarray, ...]:
    dense = rng.standard_normal((b, DENSE)).astype(np.float32)
    bags = [((rng.zipf(1.05, (b, p)) - 1) % n).astype(np.int32) for n, p in zip(ROWS, POOL,
                                                                                  strict=True)]
    return (dense, *bags)


def equality(a, b) -> str:
    """``yes`` when every output has the same bits, else the largest difference."""
    import jax

    pairs = [(np.asarray(x), np.asarray(y))
             for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)]
    if all(np.array_equal(x, y, equal_nan=True) for x, y in pairs):
        return "yes"
    return f"NO, max abs difference {max(float(np.nanmax(np.abs(x - y))) for x, y in pairs):.3g}"


def timed(fn, args, calls: int) -> float:
    import jax

    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls


def rounds(fns: dict, args, n: int, calls: int, round_s: float = 5e-3) -> dict[str, list[float]]:
    """Per-round mean call times of every variant. A round runs each variant for at least
    ``calls`` calls and about ``round_s`` seconds (short blocks of a fast call measure the
    machine's noise, not the call), in one order and then in the reverse one (A B B A: a
    drift of the machine within the round weighs on every variant alike); the order rotates
    every round, so none always runs first."""
    single = max(timed(fn, args, 3) for fn in fns.values())
    calls = max(calls, int(round_s / 2 / max(single, 1e-7)))
    runs: dict[str, list[float]] = {k: [] for k in fns}
    order = list(fns)
    for r in range(n):
        turn = order[r % len(order):] + order[:r % len(order)]
        t = {k: 0.0 for k in fns}
        for k in turn + turn[::-1]:
            t[k] += timed(fns[k], args, calls) / 2
        for k in fns:
            runs[k].append(t[k])
    return runs


def alternate(fns: dict, args, n: int, calls: int) -> dict[str, float]:
    """Medians of the per-round mean call times (``rounds``)."""
    return {k: statistics.median(v) for k, v in rounds(fns, args, n, calls).items()}


def paired(runs: dict[str, list[float]], base: str, other: str) -> tuple[float, float, float]:
    """``base``'s time over ``other``'s: the median of the per-round ratios (the two timed
    side by side in every round) and its ~95% confidence interval from order statistics
    (the median's distribution-free interval: ranks n/2 -+ 0.98 sqrt(n))."""
    r = sorted(a / b for a, b in zip(runs[base], runs[other], strict=True))
    n = len(r)
    half = 0.98 * n ** 0.5
    lo, hi = max(0, int(n / 2 - half)), min(n - 1, int(math.ceil(n / 2 + half)) - 1)
    return statistics.median(r), r[lo], r[hi]


def ratio_text(m: tuple[float, float, float]) -> str:
    return f"{m[0]:.3f}x (95% CI {m[1]:.3f}-{m[2]:.3f})"


def forward_line(plain, ours, args, n: int, other: str) -> str:
    """``jax.jit``'s ``plain`` and the compiled ``ember_xla.jit`` ``ours`` of one function:
    outputs compared bit for bit, then timed side by side (``rounds``); one result line with
    both medians, the clusters ``ours`` rewrote and the paired speedup."""
    same = np.asarray(ours(*args)).tobytes() == np.asarray(plain(*args)).tobytes()
    rewritten = sum(len(r["clusters"]) for r in ours.reports.values())
    runs = rounds({"jax.jit": plain, other: ours}, args, n, 10)
    med = {k: statistics.median(v) for k, v in runs.items()}
    return (f"jax.jit {med['jax.jit'] * 1e3:7.3f} ms  {other} {med[other] * 1e3:7.3f} ms "
            f"({rewritten} clusters)  speedup {ratio_text(paired(runs, 'jax.jit', other))}  "
            f"bit-equal: {'yes' if same else 'NO'}")


def forward_cases(doc: str, makers: dict, argv: list[str] | None, place: bool) -> int:
    """The main of a benchmark of named forward cases (``makers``: case name -> rng -> list of
    (row name, function, inputs)): ``--cases`` (all by default), ``--rounds``; each function
    through ``jax.jit`` and ``ember_xla.jit`` with its defaults, one ``forward_line`` each.
    ``place``: put the inputs on the device once (else numpy inputs, copied by every call)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(makers))
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args(argv)
    import jax

    import ember_xla

    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.2f}; ember_xla.jit with its defaults")
    for case in args.cases.split(","):
        if case not in makers:
            p.error(f"unknown case {case!r}; expected one of {', '.join(makers)}")
        for name, fn, xs in makers[case](rng):
            if place:
                xs = jax.device_put(xs)
            line = forward_line(jax.jit(fn), ember_xla.jit(fn), xs, args.rounds,
                                "ember_xla.jit")
            print(f"{name:24s} {line}", flush=True)
    return 0


def step_line(optimizer: str, donated: bool, runs: dict[str, list[float]], base: str,
              other: str, fused: list, same: bool) -> str:
    """One result line of a training-step benchmark: both medians per step, the paired
    speedup of ``other`` over ``base``, the fused updates, the bit check."""
    med = {k: statistics.median(v) for k, v in runs.items()}
    return (f"{optimizer:8s} {'donated' if donated else 'kept':8s} {base} "
            f"{med[base] * 1e3:8.2f} ms  {other} {med[other] * 1e3:8.2f} ms  speedup "
            f"{ratio_text(paired(runs, base, other))}  fused {fused}  bit-equal first steps: "
            f"{'yes' if same else 'NO'}")


def training_step_arguments(p, rounds: int) -> None:
    """The flags of the one-table training-step benchmarks (bench_keras_jax.py,
    bench_nnx_jit.py): the table, the bags, and how long to time."""
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--pooling", type=int, default=20)
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--steps", type=int, default=5)


def clusters(f) -> str:
    cs = [c for r in f.reports.values() for c in r["clusters"]]
    fwd = sum(c["pass"] == "forward" for c in cs)
    back = [c.get("optimizer") or "kept" for c in cs if c["pass"] == "backward"]
    return f"{fwd} forward" + (f", {len(back)} backward ({', '.join(back)})" if back else "")


def serve(model, params, b: int, args) -> None:
    import jax

    import ember_xla

    inputs = batch(np.random.default_rng(b), b)
    call = (params, *inputs)
    apply = model.apply
    fns = {"jax.jit": jax.jit(apply), "ember_xla.jit": ember_xla.jit(apply)}
    ok = equality(fns["jax.jit"](*call), fns["ember_xla.jit"](*call))

    def echo(params, dense, *bags):
        return dense

    noops = {"jax.jit": jax.jit(echo, keep_unused=True),
             "ember_xla.jit": ember_xla.jit(echo, keep_unused=True)}
    ef = fns["ember_xla.jit"]
    if not any(r["clusters"] for r in ef.reports.values()):  # then it must be jax's program
        ours = ef.lower(*call).compile().as_text()
        assert ours == fns["jax.jit"].lower(*call).compile().as_text(), "not jax's program"
        ok += " (nothing rewritten: the same optimized module as jax.jit's)"
    over = alternate(noops, call, args.rounds, args.calls)
    fns["jax.jit (again)"] = jax.jit(apply)  # the same program: the noise of the measurement
    runs = rounds(fns, call, args.rounds, args.calls)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"B={b:5d}  {clusters(fns['ember_xla.jit'])} clusters rewritten, bit-identical: {ok}")
    for k in ("jax.jit", "ember_xla.jit"):
        print(f"  {k:14s} {med[k] * 1e6:10.1f} us/call   overhead {over[k] * 1e6:6.1f} us/call")
    print(f"  speedup ember_xla.jit vs jax.jit: "
          f"{ratio_text(paired(runs, 'jax.jit', 'ember_xla.jit'))}   overhead difference "
          f"{(over['ember_xla.jit'] - over['jax.jit']) * 1e6:+.1f} us")
    print(f"  noise: jax.jit vs a second jax.jit of the same function: "
          f"{ratio_text(paired(runs, 'jax.jit', 'jax.jit (again)'))}")


def train(model, params, b: int, args) -> None:
    import jax
    import jax.numpy as jnp

    import ember_xla

    dense, *bags = batch(np.random.default_rng(7), b)
    y = np.random.default_rng(8).standard_normal(b).astype(np.float32)

    def step(params, dense, y, *bags):
        def loss(p):
            return jnp.mean((model.apply(p, dense, *bags) - y) ** 2)

        value, g = jax.value_and_grad(loss)(params)
        return value, jax.tree.map(lambda p, g: p - 0.01 * g, params, g)

    fns = {"jax.jit": jax.jit(step, donate_argnums=0),
           "ember_xla.jit": ember_xla.jit(step, donate_argnums=0)}
    state = {k: jax.tree.map(jnp.array, params) for k in fns}  # a copy each: both donate
    first = {}
    for k, fn in fns.items():
        first[k] = fn(state[k], dense, y, *bags)
        state[k] = first[k][1]
    ok = equality(first["jax.jit"], first["ember_xla.jit"])
    runs: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(args.train_rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            out = fn(state[k], dense, y, *bags)
            jax.block_until_ready(out)
            runs[k].append(time.perf_counter() - t0)
            state[k] = out[1]
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"train B={b}  SGD, params donated: {clusters(fns['ember_xla.jit'])} clusters "
          f"rewritten, first step bit-identical: {ok}")
    for k in fns:
        print(f"  {k:14s} {med[k] * 1e3:10.2f} ms/step")
    print(f"  speedup ember_xla.jit vs jax.jit: {med['jax.jit'] / med['ember_xla.jit']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024])
    ap.add_argument("--rounds", type=int, default=101)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--train-batch", type=int, default=1024, help="0: no training row")
    ap.add_argument("--train-rounds", type=int, default=21)
    args = ap.parse_args()
    import jax

    model = build_model()
    params = jax.device_put(model.init(jax.random.key(0), *batch(np.random.default_rng(0), 2)))
    print(f"flax DLRM-like: tables {ROWS} x D={DIM}, pooling {POOL}; {args.rounds} rounds of >= "
          f"{args.calls} calls and ~2.5 ms each way (A B B A), order rotated, medians; "
          f"load {os.getloadavg()[0]:.1f}")
    for b in args.batches:
        serve(model, params, b, args)
    if args.train_batch:
        train(model, params, args.train_batch, args)


if __name__ == "__main__":
    sys.exit(main())
