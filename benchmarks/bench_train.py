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
                compiled on XLA:CPU; what the rewrite finds is printed (today: the forward
                lookups; the backward and the update stay in XLA);
  ember_donated the donated export, rewritten (input_output_alias kept);
  tbe           FBGEMM SplitTableBatchedEmbeddingBagsCodegen on the CPU (fbgemm-gpu-cpu 1.8.0)
                with the same optimizer fused into its backward, tables updated in place; the
                read-out in torch;
  torch         torch.nn.EmbeddingBag(mode='sum', sparse=True) per table + torch.optim.SGD
                (sgd) or torch.optim.Adagrad with sparse gradients (element-wise Adagrad: not
                the same algorithm as rowwise; labelled so).
Peak RSS per variant: the process's resident set sampled every 2 ms while the variant runs,
minus the resident set before the timing loop (tables and inputs shared by all variants).

    python benchmarks/bench_train.py --rows_cap 100000 --reps 5     # what fits a shared box
    python benchmarks/bench_train.py                               # full size: 1M rows cap
    python benchmarks/bench_train.py --tables 4 --rows_cap 20000 --batch 256 --reps 3  # smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np
from bench_embedding import BLOCK, MLPERF_ROWS, POOLING

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
    args = p.parse_args(argv)
    if not 1 <= args.tables <= 26 or args.rows_cap < 1 or args.batch < 1 or args.reps < 1:
        p.error("--tables must be in [1, 26]; --rows_cap, --batch and --reps positive")
    bad = set(args.optimizers.split(",")) - {"sgd", "rowwise_adagrad"}
    if bad:
        p.error(f"unknown optimizer(s) {sorted(bad)}: choose from sgd, rowwise_adagrad")
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


def jax_variants(args, data, optimizer: str) -> tuple[dict, dict, dict]:
    """xla, xla_donated, ember, ember_donated: {name: run}, {name: label}, {name: outputs}."""
    import jax

    from ember_xla.hlo_import.model import Model
    from ember_xla.hlo_import.proto import module_from_proto
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    rows, tables, ids, seg, readout, labels = data
    step = step_fn(args.batch, optimizer)
    slots = [np.zeros(n, np.float32) for n in rows]
    batch_in = [jax.device_put(x) for x in (ids, seg, labels)]
    runs, labels_, outs = {}, {}, {}
    for donated in (False, True):
        jitted = jax.jit(step, donate_argnums=(0, 1) if donated else ())
        state = [jax.device_put(tables), jax.device_put(slots), jax.device_put(readout)]
        name = "xla_donated" if donated else "xla"

        def run_xla(jitted=jitted, state=state, donated=donated):
            out = jitted(*state, *batch_in)
            if donated:
                state[:] = list(out[:3])
            jax.block_until_ready(out)
            return out
        outs[name] = [np.asarray(x) for x in jax.tree_util.tree_leaves(
            jax.jit(step)(tables, slots, readout, ids, seg, labels))]
        runs[name], labels_[name] = run_xla, f"XLA:CPU jax.jit{' donated' if donated else ''}"

        lowered = jitted.lower(tables, slots, readout, ids, seg, labels)
        proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
        model = Model(module_from_proto(proto, "bench_train"), "bench_train")
        result = rewrite_module(model.module)
        kinds: dict[str, int] = {}
        for c in result.clusters:
            key = f"{c.get('pass', 'forward')} {c['kind']}"
            kinds[key] = kinds.get(key, 0) + 1
        loaded = compile_module(result.module)._loaded
        flat = [jax.device_put(x) for x in jax.tree_util.tree_leaves(
            (tables, slots, readout, ids, seg, labels))]
        n_state = len(jax.tree_util.tree_leaves((tables, slots, readout)))
        ename = "ember_donated" if donated else "ember"

        def run_ember(loaded=loaded, flat=flat, donated=donated, n_state=n_state):
            out = loaded.execute(flat)
            for o in out:
                o.block_until_ready()
            if donated:
                flat[:n_state] = out[:n_state]
            return out
        fresh = [jax.device_put(x) for x in jax.tree_util.tree_leaves(
            (tables, slots, readout, ids, seg, labels))]
        outs[ename] = [np.asarray(o) for o in loaded.execute(fresh)]
        runs[ename] = run_ember
        found = ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items())) or "nothing"
        labels_[ename] = f"ember rewrite{' donated' if donated else ''} ({found})"
    return runs, labels_, outs


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


class RssSampler:
    """Peak resident set of this process while a variant runs (a sampling thread)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _loop(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> RssSampler:
        self.peak = self.rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def time_variants(variants: dict, reps: int) -> tuple[dict, dict, dict]:
    times: dict[str, list[float]] = {k: [] for k in variants}
    peaks: dict[str, int] = {k: 0 for k in variants}
    order = list(variants)
    for rep in range(reps):
        for k in order[rep % len(order):] + order[:rep % len(order)]:
            with RssSampler() as s:
                variants[k]()
                for _ in range(BLOCK - 1):
                    t = time.perf_counter()
                    variants[k]()
                    times[k].append(time.perf_counter() - t)
            peaks[k] = max(peaks[k], s.peak)
    return ({k: statistics.median(v) for k, v in times.items()},
            {k: min(v) for k, v in times.items()}, peaks)


def check(outs: dict) -> list[str]:
    """The rewritten steps against XLA's, bit for bit (loss, tables, slots, read-out)."""
    lines = []
    for name, ref in (("ember", "xla"), ("ember_donated", "xla")):
        same = len(outs[name]) == len(outs[ref]) and all(
            a.tobytes() == b.tobytes() for a, b in zip(outs[name], outs[ref], strict=True))
        lines.append(f"check: {name} == XLA bit for bit (loss, tables, slots): {same}")
    return lines


def check_torch(name: str, run, xla_tables: list[np.ndarray], exact_algorithm: bool) -> str:
    """One step of a torch variant from the shared start against XLA's updated tables."""
    run()
    got = run.tables()
    diff = max(float(np.abs(a - b).max()) for a, b in zip(got, xla_tables, strict=True))
    close = all(np.allclose(a, b, rtol=1e-4, atol=1e-6)
                for a, b in zip(got, xla_tables, strict=True))
    what = "allclose to" if exact_algorithm else "(another algorithm) vs"
    return f"check: {name} tables after one step {what} XLA: {close} (max |diff| {diff:.2e})"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import jax
    import torch

    jax.config.update("jax_platforms", "cpu")
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    data = make_data(args)
    rows = data[0]
    gib = sum(rows) * args.dim * 4 / 2**30
    print(f"DLRM-like training step: {args.tables} tables, D={args.dim}, B={args.batch}, f32, "
          f"{sum(POOLING[:args.tables])} lookups/sample, Zipf({args.zipf}) ids, rows capped at "
          f"{args.rows_cap:,} ({gib:.2f} GiB of tables); setup {time.perf_counter() - t0:.1f} s; "
          f"load average {os.getloadavg()[0]:.2f}")
    ok = True
    for optimizer in args.optimizers.split(","):
        runs, names, outs = jax_variants(args, data, optimizer)
        for line in check(outs):
            print(line)
            ok = ok and line.endswith("True")
        xla_tables = outs["xla"][:len(rows)]
        for make in (tbe_variant, torch_variant):
            run, label = make(args, data, optimizer)
            key = "tbe" if make is tbe_variant else "torch"
            runs[key], names[key] = run, label
            print(check_torch(key, run, xla_tables, key == "tbe" or optimizer == "sgd"))
        base = RssSampler().rss()
        med, mins, peaks = time_variants(runs, args.reps)
        print(f"\n{optimizer}: {args.reps} repetitions of blocks of {BLOCK} (first untimed, "
              f"order rotated); load average {os.getloadavg()[0]:.2f}; resident before timing "
              f"{base / 2**30:.2f} GiB")
        print("| variant | median ms | min ms | vs XLA:CPU | vs TBE | peak RSS over base GiB |")
        print("|---|---:|---:|---:|---:|---:|")
        for k in runs:
            print(f"| {names[k]} | {med[k] * 1e3:.1f} | {mins[k] * 1e3:.1f} | "
                  f"{med['xla'] / med[k]:.2f}x | {med['tbe'] / med[k]:.2f}x | "
                  f"{max(peaks[k] - base, 0) / 2**30:.2f} |")
        del runs, outs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
