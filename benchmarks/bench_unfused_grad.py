"""An optax.adam step on a token lookup (``jnp.take(t, ids[B, 20]) @ w``: the table's gradient
is an unfused ``ember.scatter_grad``, Adam's update stays in XLA): ``ember_xla.jit`` with the
cost model on (slow gradients kept in XLA by rewrites/gradient_rule.py) and off (always
rewritten) vs ``jax.jit``; medians of per-round ratios with a 95% CI (bench_jit.rounds), every
output compared by bytes.

    nice python benchmarks/bench_unfused_grad.py [--shapes 0,3] [--rounds 11]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

# (V, D, L): table rows, dimension, lookups
SHAPES = [(1000, 16, 4000), (20000, 32, 200000), (50000, 64, 32768), (1000000, 64, 40000),
          (200000, 128, 200000)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default=",".join(str(i) for i in range(len(SHAPES))))
    p.add_argument("--rounds", type=int, default=11)
    args = p.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import optax
    from bench_jit import paired, ratio_text, rounds

    import ember_xla

    rng = np.random.default_rng(0)
    bad = 0
    for v, d, n in [SHAPES[int(i)] for i in args.shapes.split(",")]:
        table = rng.standard_normal((v, d)).astype(np.float32) * 0.1
        ids = jnp.asarray(rng.integers(0, v, (n // 20, 20)).astype(np.int32))
        w = rng.standard_normal((d, 1)).astype(np.float32)
        opt = optax.adam(1e-3)

        def step(prm, state, ids, opt=opt):
            g = jax.grad(lambda q: jnp.mean((jnp.take(q["t"], ids, axis=0) @ q["w"]) ** 2))(prm)
            u, state = opt.update(g, state, prm)
            return optax.apply_updates(prm, u), state

        prm = {"t": jnp.asarray(table), "w": jnp.asarray(w)}
        fargs = (prm, opt.init(prm), ids)
        fns = {"xla": jax.jit(step)}
        outs = {"xla": fns["xla"](*fargs)}
        what = {}
        for mode in ("on", "off"):
            os.environ["EMBER_XLA_COST_MODEL"] = mode  # read when the step is first rewritten
            fns[mode] = ember_xla.jit(step)
            outs[mode] = fns[mode](*fargs)
            reps = list(fns[mode].reports.values())
            kept = [m for r in reps for m in r["near_misses"]
                    if m.get("kept_in_xla") and m["pattern"] == "ember.scatter_grad"]
            what[mode] = ("kept in XLA" if kept else
                          ",".join(c["kind"] for r in reps for c in r["clusters"]) or "nothing")
        equal = {m: all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in
                        zip(jax.tree.leaves(outs["xla"]), jax.tree.leaves(outs[m]), strict=True))
                 for m in ("on", "off")}
        bad += not all(equal.values())
        runs = rounds(fns, fargs, args.rounds, 2)
        med = {k: statistics.median(x) * 1e3 for k, x in runs.items()}
        print(f"V={v} D={d} L={n}: on: {what['on']}, off: {what['off']}; bit-equal {equal}; "
              f"ms xla {med['xla']:.2f} on {med['on']:.2f} off {med['off']:.2f}; xla/on "
              f"{ratio_text(paired(runs, 'xla', 'on'))} xla/off "
              f"{ratio_text(paired(runs, 'xla', 'off'))}; load {os.getloadavg()[0]:.1f}",
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
