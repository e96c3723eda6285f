"""The ``sparse_update/<optimizer>`` families of the cost model: a lookup's gradient fused with
its optimizer's update (``ember.sparse_sgd``, ``ember.sparse_adagrad``,
``ember.sparse_rowwise_adagrad``) against XLA:CPU's scatter and dense update of the whole table.

Per optimizer, form (plain: the gradient rows given; gathered: a segment sum's pooled rows read
by the kernel) and grid cell (table rows V, lookups L, dimension D) it exports one training
step (``jax.value_and_grad`` of a lookup's loss, then the update), rewrites it with the cost
model off, keeps every call but the fused update in XLA, checks the two modules bit for bit
and times them alternately in one process, with the table (and slot) kept by the caller (the
kernel then writes the whole new table, as XLA does) and donated (each run consuming the
previous run's state, as a training loop does: the kernel then reads the rows it does not
touch, XLA rewrites the whole table in place). The decision reads the points of the call's
form and donation (ember_xla/rewrites/gradient_rule.py), as for the unfused gradient.

    python benchmarks/calibrate_cost_model.py --families sparse_update/sgd,sparse_update/adagrad
"""

from __future__ import annotations

import itertools
import os

import numpy as np

OPTIMIZERS = ("sgd", "adagrad", "rowwise_adagrad")
FAMILIES = tuple(f"sparse_update/{o}" for o in OPTIMIZERS)
FORMS = ("plain", "gathered")
ROWS = (1_000, 10_000, 100_000, 1_000_000)
LOOKUPS = (100, 1_000, 10_000, 100_000)
DIMS = (16, 128)
POOLING = 10  # lookups per pooled row in the gathered form
RULE = ("ember_xla/rewrites/gradient_rule.py: the measured points of the call's form and "
        "donation")
LR, EPS = 0.05, 1e-7


def _loss(form: str, pooled: int):
    """A squared error of the looked-up rows (plain) or of their segment sums (gathered): the
    gradient depends on the lookup, as a model's does, so XLA orders the table's in-place
    update after the lookup (with a gradient independent of it, XLA:CPU copies a donated
    table before updating it, for both variants)."""
    import jax
    import jax.numpy as jnp

    if form == "plain":
        return lambda t, m, r: 0.5 * jnp.sum(jnp.square(jnp.take(t, r, axis=0) - m))
    return lambda t, m, r, s: 0.5 * jnp.sum(jnp.square(jax.ops.segment_sum(
        jnp.take(t, r, axis=0), s, num_segments=pooled) - m))


def step_fn(optimizer: str, form: str, pooled: int):
    """(table, slot or nothing, *batch) -> (loss, new table[, new slot]): one training step."""
    import jax
    import jax.numpy as jnp
    import optax

    loss = _loss(form, pooled)
    if optimizer == "sgd":
        opt = optax.sgd(LR)

        def sgd(t, *batch):
            value, g = jax.value_and_grad(loss)(t, *batch)
            updates, _ = opt.update(g, opt.init(t))
            return value, optax.apply_updates(t, updates)

        return sgd
    if optimizer == "adagrad":
        opt = optax.adagrad(LR, eps=EPS)

        def adagrad(t, a, *batch):
            value, g = jax.value_and_grad(loss)(t, *batch)
            state = jax.tree.map(lambda _: a, opt.init(t))
            updates, state = opt.update(g, state, t)
            return value, optax.apply_updates(t, updates), jax.tree.leaves(state)[0]

        return adagrad

    def rowwise(t, a, *batch):  # FBGEMM's rowwise Adagrad, as tests/rewrites writes it
        value, g = jax.value_and_grad(loss)(t, *batch)
        a = a + jnp.mean(g * g, axis=1)
        return value, t - LR * g / (jnp.sqrt(a)[:, None] + EPS), a

    return rowwise


def step_inputs(optimizer: str, form: str, rows: int, lookups: int, dim: int,
                rng) -> list[np.ndarray]:
    from calibrate_cost_model import grad_inputs

    table, *batch = grad_inputs(form, rows, lookups, dim, rng)
    if optimizer == "sgd":
        return [table, *batch]
    slot = (np.full((rows, dim), 0.1, np.float32) if optimizer == "adagrad"
            else np.full((rows,), 0.1, np.float32))
    return [table, slot, *batch]


def _alternate_loop(exes: dict, on_device: list, slots: int, reps: int) -> dict[str, list[float]]:
    """``calibrate_cost_model.alternate_runs`` of donated steps: each run consumes the state
    (table and slot) the previous run of the same executable returned, as a training loop
    does."""
    import time

    import jax
    from calibrate_cost_model import alternate_runs

    states = {k: [jax.device_put(np.asarray(a)) for a in on_device[:1 + slots]] for k in exes}
    batch = on_device[1 + slots:]

    def run(k: str, n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            outs = exes[k].execute([*states[k], *batch])
            states[k] = outs[1:2 + slots]
        jax.block_until_ready(states[k])
        return (time.perf_counter() - t) / n

    return alternate_runs(run, exes, reps)


def measure(optimizer: str, form: str, rows: int, lookups: int, dim: int, reps: int,
            rng, donated: bool = False) -> dict:
    """XLA's step and the one whose table gradient and update are one fused call, alternating
    (``donated``: the table and slot donated, each run consuming the previous run's)."""
    import jax
    from calibrate_cost_model import _alternate, timed_against_xla

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    args = step_inputs(optimizer, form, rows, lookups, dim, rng)
    slots = 0 if optimizer == "sgd" else 1
    fn = step_fn(optimizer, form, lookups // POOLING)
    if donated:
        fn = jax.jit(fn, donate_argnums=tuple(range(1 + slots)))
    module = from_jax(fn, *args).module
    result = rewrite_module(module, cost_model=False)
    where = (f"sparse_update/{optimizer} {form} V={rows} L={lookups} D={dim}"
             f"{' donated' if donated else ''}")
    fused = [c for c in result.clusters if c.get("optimizer") == optimizer]
    if len(fused) != 1:
        got = [(c["kind"], c.get("optimizer"), c.get("optimizer_reason"))
               for c in result.clusters]
        raise SystemExit(f"{where}: expected one fused {optimizer} update, got {got}")
    alternate = (lambda ex, dev, n: _alternate_loop(ex, dev, slots, n)) if donated else _alternate
    return {"form": form, "donated": donated, "V": rows, "D": dim, "L": lookups, "S": rows,
            **timed_against_xla(module, result.module, result.clusters, fused[0], args, where,
                                reps, alternate)}


def calibrate(family: str, reps: int, rng, argv: list[str] | None) -> dict:
    """One ``sparse_update/<optimizer>`` family: its measured points, command, date, load."""
    from calibrate_cost_model import _command, _now

    optimizer = family.split("/", 1)[1]
    load0 = os.getloadavg()[0]
    points = []
    for donated, form, v, n, d in itertools.product((False, True), FORMS, ROWS, LOOKUPS, DIMS):
        m = measure(optimizer, form, v, n, d, reps, rng, donated)
        points.append(m)
        print(f"{family} {form:8s} {'donated' if donated else 'kept   '} V={v:7d} L={n:6d} "
              f"D={d:3d}  XLA {m['xla_s'] * 1e6:10.1f} us  ember {m['ember_s'] * 1e6:10.1f} us"
              f"  ratio {m['xla_s'] / m['ember_s']:.2f}x load {os.getloadavg()[0]:.1f}", flush=True)
    return {"points": points, "decided_by": RULE, "command": _command(argv), "date": _now(),
            "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)]}
