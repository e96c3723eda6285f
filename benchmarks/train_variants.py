"""The JAX side of benchmarks/bench_train.py: the shared data, the training step and its
XLA:CPU and ember variants (donated or not), and the table of every variant by name."""

from __future__ import annotations

import re

import numpy as np
from stage_model import MLPERF_ROWS, POOLING
from stage_variants import wait_for_table_pages
from train_torch import EPS, LR, tbe_variant, torch_variant

from ember_xla.native import table_pages


def make_data(args):
    rng = np.random.default_rng(args.seed)
    rows = [min(r, args.rows_cap) for r in MLPERF_ROWS[: args.tables]]
    pool = POOLING[: args.tables]
    tables = [(rng.standard_normal((n, args.dim), dtype=np.float32) * 0.01) for n in rows]
    ids = [
        ((rng.zipf(args.zipf, args.batch * p) - 1) % n).astype(np.int32)
        for n, p in zip(rows, pool, strict=True)
    ]
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
        pooled = [
            jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=batch)
            for t, i, s in zip(tables, ids, seg, strict=True)
        ]
        return ((jnp.concatenate(pooled, axis=1) @ readout - labels) ** 2).mean()

    def step(tables, slots, readout, ids, seg, labels):
        loss, (g_tables, g_readout) = jax.value_and_grad(loss_fn)(
            (tables, readout), ids, seg, labels
        )
        if optimizer == "sgd":
            new = [t - LR * g for t, g in zip(tables, g_tables, strict=True)]
        else:
            slots = [a + jnp.mean(g * g, axis=1) for a, g in zip(slots, g_tables, strict=True)]
            new = [
                t - LR * g / (jnp.sqrt(a)[:, None] + EPS)
                for t, g, a in zip(tables, g_tables, slots, strict=True)
            ]
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

        def run():  # a training loop: each step's new state is the next step's input
            out = jitted(*state, *batch)
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
    outs = [
        np.asarray(o)
        for o in loaded.execute([jax.device_put(x) for x in jax.tree_util.tree_leaves(start)])
    ]
    flat = [jax.device_put(x) for x in jax.tree_util.tree_leaves(start)]
    # New tables may sit where an earlier variant's freed tables were collapsed: the kernels key
    # the collapse by address, so forget the old ones before these are first read.
    table_pages.forget()

    def run():  # a training loop: each step's new state is the next step's input
        out = loaded.execute(flat)
        for o in out:
            o.block_until_ready()
        flat[:n_state] = out[:n_state]
        return out

    run.calls = ember_calls(loaded)
    run.buffer_cache = True  # ember_xla's default allocation (train_memory.allocator)
    run()
    run()  # a second call at the same addresses queues the tables' move onto huge pages
    print(f"table pages, {name}: {wait_for_table_pages()}")
    found = ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items())) or "nothing"
    return run, f"ember rewrite{' donated' if donated else ''} ({found})", outs


def ember_calls(loaded) -> dict[str, str]:
    """The compiled module's ember custom-calls: instruction name (the name of its thunk in
    XLA:CPU's profile) -> target."""
    text = "\n".join(m.to_string() for m in loaded.hlo_modules())
    return dict(
        re.findall(
            r"%?([\w.\-]+) = [^\n]*custom-call\([^\n]*"
            r'custom_call_target="(ember\.[\w.]+)"',
            text,
        )
    )


VARIANTS = (*JAX_VARIANTS, "tbe", "torch")


def make_variant(args, data, optimizer: str, name: str):
    """(run, label, outputs or None) of variant ``name``."""
    if name in JAX_VARIANTS:
        return jax_variant(args, data, optimizer, name)
    run, label = (tbe_variant if name == "tbe" else torch_variant)(args, data, optimizer)
    return run, label, None
