"""DLRM-like training step: XLA:CPU vs the ember rewrite vs FBGEMM TBE vs torch EmbeddingBag.

A benchmark, not a test. The step is the embedding half of MLPerf DLRM-DCNv2 trained with a
linear read-out: 26 tables (MLPerf rows capped at ``--rows_cap``), D=128, f32, MLPerf pooling
factors, Zipf-distributed ids (duplicates within and across bags, as in click logs), bags
pooled by ``jax.ops.segment_sum(jnp.take(...))``, concatenated, times a [26 D, 1] read-out,
squared error; ``jax.value_and_grad`` and the optimizer's update of every table (and the
read-out):
  sgd                t <- t - lr * g
  rowwise_adagrad    a <- a + mean(g * g, axis=1);  t <- t - lr * g / (sqrt(a) + eps)
(FBGEMM's EXACT_SGD and EXACT_ROWWISE_ADAGRAD).

Variants, run side by side in one process, interleaved in blocks (3 runs in a row, the first
untimed; the block order rotates every repetition), medians of the timed runs:
  xla           jax.jit(step) on XLA:CPU: new tables written every step;
  xla_donated   jax.jit(step, donate_argnums=(tables, slots)): XLA may update in place;
  ember         the same step exported as HLO, rewritten by ember_xla.rewrites (defaults),
                compiled on XLA:CPU; the clusters it finds are printed (forward lookups,
                backward gradients, the optimizer fused into a gradient where it is);
  ember_donated the donated export, rewritten (input_output_alias kept);
  tbe           FBGEMM SplitTableBatchedEmbeddingBagsCodegen on the CPU (fbgemm-gpu-cpu 1.8.0)
                with the same optimizer fused into its backward, tables updated in place; the
                read-out in torch;
  torch         torch.nn.EmbeddingBag(mode='sum', sparse=True) per table + torch.optim.SGD
                (sgd) or torch.optim.Adagrad with sparse gradients (element-wise Adagrad: not
                the same algorithm as rowwise; labelled so).
The copy floor: without donation every variant must write whole new tables (and slots), so
a numpy copy of the same bytes into preallocated arrays (``copy``, timed interleaved with the
variants) gives the machine's memory bandwidth under the same load and the floor of a step
that is not donated; each variant's ratio to it is printed, and to ``xla_copy``: XLA:CPU
writing ``-t`` of every table into its fresh output buffers (what any non-donated XLA step
pays for its new tables, allocation and first touch of the pages included).
Peak RSS per variant (``--rss``): each variant alone in a fresh process, built (its check
outputs dropped) and then run 3 times; its peak resident set while running (sampled every ms)
minus the resident set once the shared numpy data exist and the frameworks are imported: the
variant's own copy of the tables and state, its compiled code and every step's buffers count.

    python benchmarks/bench_train.py --rows_cap 100000 --reps 5 --rss  # what fits a shared box
    python benchmarks/bench_train.py                               # full size: 1M rows cap
    python benchmarks/bench_train.py --tables 4 --rows_cap 20000 --batch 256 --reps 3  # smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from bench_embedding import BLOCK
from stage_model import MLPERF_ROWS, POOLING

LR, EPS = 0.01, 1e-8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows_cap", type=int, default=1_000_000, help="rows per table at most")
    p.add_argument("--tables", type=int, default=26, help="the first k of the 26 tables")
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--reps", type=int, default=5, help="timed repetitions (blocks)")
    p.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the ids")
    p.add_argument("--optimizers", default="sgd,rowwise_adagrad")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated subset of " + ", ".join(VARIANTS))
    p.add_argument("--rss", action="store_true",
                   help="also measure each variant's peak RSS, each in a fresh process")
    p.add_argument("--rss_of", choices=VARIANTS, help=argparse.SUPPRESS)  # the child's job
    args = p.parse_args(argv)
    if not 1 <= args.tables <= 26 or args.rows_cap < 1 or args.batch < 1 or args.reps < 1:
        p.error("--tables must be in [1, 26]; --rows_cap, --batch and --reps positive")
    bad = set(args.optimizers.split(",")) - {"sgd", "rowwise_adagrad"}
    if bad:
        p.error(f"unknown optimizer(s) {sorted(bad)}: choose from sgd, rowwise_adagrad")
    chosen = args.variants.split(",")
    if set(chosen) - set(VARIANTS) or not {"xla", "tbe"} <= set(chosen):
        p.error(f"--variants: a subset of {', '.join(VARIANTS)} holding xla and tbe (the "
                "ratios' references)")
    args.variants = [v for v in VARIANTS if v in chosen]
    return args


def make_data(args):
    rng = np.random.default_rng(args.seed)
    rows = [min(r, args.rows_cap) for r in MLPERF_ROWS[:args.tables]]
    pool = POOLING[:args.tables]
    tables = [(rng.standard_normal((n, args.dim), dtype=np.float32) * 0.01) for n in rows]
    ids = [((rng.zipf(args.zipf, args.batch * p) - 1) % n).astype(np.int32)
           for n, p in zip(rows, pool, strict=True)]
    seg = [np.repeat(np.arange(args.batch, dtype=np.int32), p) for p in pool]
    readout = (rng.standard_normal((args.tables * args.dim, 1)) * 0.01).astype(np.float32)
    labels = rng.standard_normal((args.batch, 1)).astype(np.float32)
    return rows, tables, ids, seg, readout, labels


def step_fn(batch: int, optimizer: str):
    """step(tables, slots, readout, ids, seg, labels) -> (tables, slots, readout, loss)."""
    import jax
    import jax.numpy as jnp

    def loss_fn(params, ids, seg, labels):
        tables, readout = params
        pooled = [jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=batch)
                  for t, i, s in zip(tables, ids, seg, strict=True)]
        return ((jnp.concatenate(pooled, axis=1) @ readout - labels) ** 2).mean()

    def step(tables, slots, readout, ids, seg, labels):
        loss, (g_tables, g_readout) = jax.value_and_grad(loss_fn)((tables, readout), ids, seg,
                                                                  labels)
        if optimizer == "sgd":
            new = [t - LR * g for t, g in zip(tables, g_tables, strict=True)]
        else:
            slots = [a + jnp.mean(g * g, axis=1) for a, g in zip(slots, g_tables, strict=True)]
            new = [t - LR * g / (jnp.sqrt(a)[:, None] + EPS)
                   for t, g, a in zip(tables, g_tables, slots, strict=True)]
        return new, slots, readout - LR * g_readout, loss

    return step


JAX_VARIANTS = ("xla", "ember", "xla_donated", "ember_donated")


def jax_variant(args, data, optimizer: str, name: str):
    """One of JAX_VARIANTS: (run, label, outputs of one step from the shared start)."""
    import jax

    from ember_xla.hlo_import.proto import module_from_proto
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    rows, tables, ids, seg, readout, labels = data
    step = step_fn(args.batch, optimizer)
    start = (tables, [np.zeros(n, np.float32) for n in rows], readout, ids, seg, labels)
    donated = name.endswith("_donated")
    jitted = jax.jit(step, donate_argnums=(0, 1) if donated else ())
    n_state = len(jax.tree_util.tree_leaves(start[:3]))
    if name.startswith("xla"):
        state = [jax.device_put(x) for x in start[:3]]
        batch = [jax.device_put(x) for x in start[3:]]

        def run():
            out = jitted(*state, *batch)
            if donated:
                state[:] = list(out[:3])
            return jax.block_until_ready(out)
        outs = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(step)(*start))]
        return run, f"XLA:CPU jax.jit{' donated' if donated else ''}", outs
    proto = jitted.lower(*start).compiler_ir("hlo").as_serialized_hlo_module_proto()
    result = rewrite_module(module_from_proto(proto, "bench_train"))
    kinds: dict[str, int] = {}
    for c in result.clusters:
        fused = f" + {c['optimizer']}" if c.get("optimizer") else ""
        key = f"{c.get('pass', 'forward')} {c['kind']}{fused}"
        kinds[key] = kinds.get(key, 0) + 1
    loaded = compile_module(result.module)._loaded
    outs = [np.asarray(o) for o in loaded.execute(
        [jax.device_put(x) for x in jax.tree_util.tree_leaves(start)])]
    flat = [jax.device_put(x) for x in jax.tree_util.tree_leaves(start)]

    def run():
        out = loaded.execute(flat)
        for o in out:
            o.block_until_ready()
        if donated:
            flat[:n_state] = out[:n_state]
        return out
    found = ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items())) or "nothing"
    return run, f"ember rewrite{' donated' if donated else ''} ({found})", outs


def tbe_variant(args, data, optimizer: str):
    import torch
    from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        ComputeDevice,
        EmbeddingLocation,
        PoolingMode,
    )
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    rows, tables, ids, seg, readout, labels = data
    opt = {"sgd": EmbOptimType.EXACT_SGD, "rowwise_adagrad": EmbOptimType.EXACT_ROWWISE_ADAGRAD}
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(n, args.dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for n in rows],
        optimizer=opt[optimizer], learning_rate=LR, eps=EPS, weights_precision=SparseType.FP32,
        pooling_mode=PoolingMode.SUM, device="cpu")
    with torch.no_grad():
        for i, t in enumerate(tables):
            tbe.split_embedding_weights()[i].copy_(torch.from_numpy(t))
    indices = torch.from_numpy(np.concatenate(ids).astype(np.int64))
    lengths = np.concatenate([np.bincount(s, minlength=args.batch) for s in seg])
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    head = torch.from_numpy(readout.copy()).requires_grad_()
    y = torch.from_numpy(labels)

    def run():
        loss = ((tbe(indices, offsets) @ head - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            head.sub_(LR * head.grad)
            head.grad = None
        return loss
    run.tables = lambda: [w.detach().numpy().copy() for w in tbe.split_embedding_weights()]
    return run, f"FBGEMM TBE {opt[optimizer].name} (fused backward + update, in place)"


def torch_variant(args, data, optimizer: str):
    import torch

    rows, tables, ids, seg, readout, labels = data
    bags = [torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(t.copy()), freeze=False,
                                                  mode="sum", sparse=True) for t in tables]
    params = [b.weight for b in bags]
    sparse = (torch.optim.SGD(params, lr=LR) if optimizer == "sgd"
              else torch.optim.Adagrad(params, lr=LR, eps=EPS))
    head = torch.from_numpy(readout.copy()).requires_grad_()
    tids = [torch.from_numpy(i.astype(np.int64)) for i in ids]
    toffs = [torch.from_numpy(np.concatenate([[0], np.cumsum(np.bincount(
        s, minlength=args.batch))[:-1]]).astype(np.int64)) for s in seg]
    y = torch.from_numpy(labels)

    def run():
        pooled = torch.cat([b(i, o) for b, i, o in zip(bags, tids, toffs, strict=True)], 1)
        loss = ((pooled @ head - y) ** 2).mean()
        sparse.zero_grad()
        head.grad = None
        loss.backward()
        sparse.step()
        with torch.no_grad():
            head.sub_(LR * head.grad)
        return loss
    run.tables = lambda: [p.detach().numpy().copy() for p in params]
    kind = "SGD" if optimizer == "sgd" else "Adagrad (element-wise, sparse grads)"
    return run, f"torch EmbeddingBag(sparse=True) + optim.{kind}"


VARIANTS = (*JAX_VARIANTS, "tbe", "torch")


def make_variant(args, data, optimizer: str, name: str):
    """(run, label, outputs or None) of variant ``name``."""
    if name in JAX_VARIANTS:
        return jax_variant(args, data, optimizer, name)
    run, label = (tbe_variant if name == "tbe" else torch_variant)(args, data, optimizer)
    return run, label, None


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_child(args, data, optimizer: str, name: str) -> None:
    """In a fresh process: build one variant (its one-step check outputs dropped), then run it
    BLOCK times while a thread samples the resident set every millisecond; print the peak
    over the resident set once the shared numpy data exist and the frameworks are imported
    (the variant's own copy of the tables and state, its compiled code and every step's
    buffers count; what building it needed transiently does not)."""
    import gc
    import threading

    import fbgemm_gpu  # noqa: F401  (imported before the base, like jax and torch)

    import ember_xla.rewrites.pipeline  # noqa: F401
    import ember_xla.runtime.execute  # noqa: F401

    base, peak, stop = rss(), [0], threading.Event()
    run, _, outs = make_variant(args, data, optimizer, name)
    del outs
    gc.collect()

    def sample() -> None:
        while not stop.wait(0.001):
            peak[0] = max(peak[0], rss())
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    for _ in range(BLOCK):
        run()
    stop.set()
    thread.join()
    print(f"PEAK {max(peak[0], rss()) - base}")


def peak_rss(argv: list[str], optimizer: str, name: str) -> float | None:
    import subprocess

    out = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--optimizers",
                          optimizer, "--rss_of", name], capture_output=True, text=True,
                         check=False)
    for line in out.stdout.splitlines():
        if line.startswith("PEAK "):
            return int(line.split()[1]) / 2**30
    return None


def copy_floor(data, optimizer: str):
    """A numpy copy of every table (and rowwise slot) into preallocated arrays: the bytes a
    step without donation must write (and read) at least; returns (run, bytes copied)."""
    rows, tables = data[0], data[1]
    src = list(tables) + ([] if optimizer == "sgd" else [np.zeros(n, np.float32) for n in rows])
    dst = [np.empty_like(a) for a in src]
    for d, a in zip(dst, src, strict=True):
        np.copyto(d, a)  # touch the destination pages once

    def run():
        for d, a in zip(dst, src, strict=True):
            np.copyto(d, a)
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


def time_variants(variants: dict, reps: int) -> tuple[dict, dict]:
    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for rep in range(reps):
        for k in order[rep % len(order):] + order[:rep % len(order)]:
            variants[k]()
            for _ in range(BLOCK - 1):
                t = time.perf_counter()
                variants[k]()
                times[k].append(time.perf_counter() - t)
    return ({k: statistics.median(v) for k, v in times.items()},
            {k: min(v) for k, v in times.items()})


def check(outs: dict) -> list[str]:
    """The rewritten steps against XLA's, bit for bit (loss, tables, slots, read-out)."""
    lines = []
    for name in {"ember", "ember_donated"} & set(outs):
        same = len(outs[name]) == len(outs["xla"]) and all(
            a.tobytes() == b.tobytes() for a, b in zip(outs[name], outs["xla"], strict=True))
        lines.append(f"check: {name} == XLA bit for bit (loss, tables, slots, read-out): {same}")
    return lines


def check_torch(name: str, run, xla_tables: list[np.ndarray], same_algorithm: bool) -> str:
    """One step of a torch variant from the shared start against XLA's updated tables. The
    rowwise-Adagrad step normalises each row's gradient: float reorderings of a tiny gradient
    move its update by a larger relative amount, hence atol LR * 1e-3."""
    run()
    got = run.tables()
    diff = max(float(np.abs(a - b).max()) for a, b in zip(got, xla_tables, strict=True))
    close = all(np.allclose(a, b, rtol=1e-4, atol=LR * 1e-3)
                for a, b in zip(got, xla_tables, strict=True))
    what = "allclose to" if same_algorithm else "(another algorithm) vs"
    return f"check: {name} tables after one step {what} XLA: {close} (max |diff| {diff:.2e})"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import jax
    import torch

    jax.config.update("jax_platforms", "cpu")
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    data = make_data(args)
    if args.rss_of:
        peak_rss_child(args, data, args.optimizers, args.rss_of)
        return 0
    rows = data[0]
    gib = sum(rows) * args.dim * 4 / 2**30
    print(f"DLRM-like training step: {args.tables} tables, D={args.dim}, B={args.batch}, f32, "
          f"{sum(POOLING[:args.tables])} lookups/sample, Zipf({args.zipf}) ids, rows capped at "
          f"{args.rows_cap:,} ({gib:.2f} GiB of tables); setup {time.perf_counter() - t0:.1f} s; "
          f"load average {os.getloadavg()[0]:.2f}")
    ok = True
    for optimizer in args.optimizers.split(","):
        runs, names, outs = {}, {}, {}
        for name in args.variants:
            runs[name], names[name], outs[name] = make_variant(args, data, optimizer, name)
        for line in check(outs):
            print(line)
            ok = ok and line.endswith("True")
        for name in {"tbe", "torch"} & set(args.variants):
            print(check_torch(name, runs[name], outs["xla"][:len(rows)],
                              name == "tbe" or optimizer == "sgd"))
        runs["copy"], copied = copy_floor(data, optimizer)
        runs["xla_copy"] = xla_new_tables(data, optimizer)
        med, mins = time_variants(runs, args.reps)
        load = os.getloadavg()[0]
        del runs, outs
        peaks = {k: peak_rss(argv, optimizer, k) for k in args.variants} if args.rss else {}
        slots = 0 if optimizer == "sgd" else sum(rows) * 4 / 2**30
        print(f"\n{optimizer}: {args.reps} repetitions of blocks of {BLOCK} (first untimed, "
              f"order rotated); load average {load:.2f}; tables {gib:.2f} GiB + optimizer "
              f"state {slots:.3f} GiB")
        print("| variant | median ms | min ms | vs XLA:CPU | vs TBE | peak RSS GiB |")
        print("|---|---:|---:|---:|---:|---:|")
        for k in args.variants:
            peak = peaks.get(k)
            print(f"| {names[k]} | {med[k] * 1e3:.1f} | {mins[k] * 1e3:.1f} | "
                  f"{med['xla'] / med[k]:.2f}x | {med['tbe'] / med[k]:.2f}x | "
                  f"{'-' if peak is None else f'{peak:.2f}'} |")
        floor = med["copy"]
        print(f"\ncopy floor (numpy copy of the {copied / 2**30:.2f} GiB of tables and slots, "
              f"interleaved): median {floor * 1e3:.1f} ms, min {mins['copy'] * 1e3:.1f} ms; "
              f"bandwidth {2 * copied / floor / 1e9:.1f} GB/s (read + write, median)")
        print(f"XLA:CPU writing new tables of the same shapes (-t, fresh output buffers, "
              f"interleaved): median {med['xla_copy'] * 1e3:.1f} ms, min "
              f"{mins['xla_copy'] * 1e3:.1f} ms")
        for k in args.variants:
            if k in ("xla", "ember"):
                print(f"  {names[k]}: {med[k] / floor:.2f}x the copy floor (acceptance: <= "
                      f"1.25x), {med[k] / med['xla_copy']:.2f}x XLA's new-table floor")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
