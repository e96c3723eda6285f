"""Calibrate the rewrite's cost model (ember_xla/rewrites/cost_model.json) on this machine.

For each cluster family (kind x combiner class) and a grid of small-to-medium sizes (batch B,
pooling P, dimension D), it builds a one-cluster JAX function, exports it, rewrites it with
the cost model off, and times the original module (XLA:CPU's own code for the cluster) and the
rewritten one (the ember kernel) alternately in one process, medians of ``--reps`` runs.
Then it fits, per family and per backend, ``t = c0 + c_look * L*D + c_out * S*D`` (seconds;
L lookups, S output rows, D dimension) by non-negative least squares on relative error, and
writes the coefficients, the raw medians and minima (the fit uses the minima, the run least
disturbed by other jobs) and this command into the JSON file.

    python benchmarks/calibrate_cost_model.py                 # writes the package's JSON file
    python benchmarks/calibrate_cost_model.py --out /tmp/c.json --reps 31
    python benchmarks/calibrate_cost_model.py --show          # measure and print, write nothing
    python benchmarks/calibrate_cost_model.py --grouped-only  # floor + grouped calls only

Beside the single clusters it measures what the per-call decision (rewrites/call_plan.py)
needs: the module floor (a module that adds 1 to one integer: what every execution costs
whatever it holds) and grouped calls (k = 2..26 segment-sum tables of one shape, concatenated
as in DLRM, in one ``ember.grouped_segment_reduce_concat``; XLA's k-table module beside it),
fitting
``t = c0_s + per_table_s * k + sum of the tables' single-cluster work`` (the single fit's
terms without its c0) the same way for the grouped call and for k separate calls; XLA's
k-table modules get work coefficients of their own (they are not the sum of single-cluster
modules).

Padded sum/mean bags (``padded_bag/sum``) are measured on a denser grid (B 1-2048, P 2-100,
D 16-256: 180 sizes), in three passes whose statistics are combined per point (the median of
the passes' medians and lower quartiles), and decided on those points
(ember_xla/rewrites/measured_grid.py); their fit is recorded, not used.

The ``scatter_grad/sum`` family (``--families scatter_grad/sum`` measures it alone into the
existing file) times a lookup's gradient whose update stays in XLA: ``jax.value_and_grad`` of
a lookup's loss, XLA's module vs the one with an unfused ``ember.scatter_grad``, over table
rows V, lookups L and D, plain and gathered forms. Its linear fit is stored but the decision
reads the measured points (ember_xla/rewrites/gradient_rule.py): the fit does not follow them.

The ``sparse_update/<optimizer>`` families (benchmarks/calibrate_fused_updates.py) time a
lookup's gradient fused with its SGD, Adagrad or rowwise Adagrad update against XLA's scatter
and dense update, on the same kind of grid, read the same way.

The machine is shared: run it when it is quiet, and compare the fit's residuals printed at
the end (the JSON keeps them) before trusting a new file.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibrate_fused_updates as fused_updates  # noqa: E402

# The fit uses each point's fastest repetition (the one least disturbed by other jobs on a
# shared machine); the medians are stored beside it.
FIT_ON = "_min_s"
OUT = Path(__file__).resolve().parents[1] / "ember_xla" / "rewrites" / "cost_model.json"
ROWS = 20_000  # table rows: larger than L2, the size of the small tables that matter here
BATCHES = (1, 16, 256, 2048)
# P >= 2: a bag or segment of one row is no cluster (XLA:CPU folds its reduce into a copy;
# rewrites/patterns/common.py, native/padded_order.py), so P=1 sizes read the P=2 cells
POOLINGS = (2, 10, 100)
DIMS = (16, 64, 256)
# Padded sum bags are decided on their measured points (ember_xla/rewrites/measured_grid.py),
# not on the fit: XLA:CPU's time for them jumps between sizes (where its loop goes parallel,
# where YNNPACK takes the reduce) and its samples are bimodal, so the grid is denser. (Padded
# max bags and segment reductions measured on it too gave points other processes did not
# reproduce -- a B=1, P=3, D=128 segment sum predicted 1.46x ran 0.92x, a B=256, P=5, D=16
# max bag predicted 1.23x ran 2.42x -- so they keep the fit for now; a max grid would skip
# P=20: XLA keeps max bags of 20-32 rows below YNNPACK's size, native/padded_order.py.)
GRID_BATCHES = (1, 16, 64, 256, 1024, 2048)
GRID_POOLINGS = (2, 5, 10, 20, 50, 100)
GRID_DIMS = (16, 32, 64, 128, 256)
# Passes over a grid family's sizes, each point's statistics the median over them.
GRID_PASSES = 3
GRID_RULE = ("ember_xla/rewrites/profitability.py: the measured points (measured_grid.py, "
             "lower quartiles as the second statistic); the fit is recorded, not used")

# family -> (kind, jax reduction); the combiner classes the kernels run differently.
FAMILIES = {
    "segment_reduce/sum": "segment_sum",
    "segment_reduce/max": "segment_max",
    "padded_bag/sum": "sum",
    "padded_bag/max": "max",
}

#: The families read off their measured points rather than their fit.
GRID_FAMILIES = ("padded_bag/sum",)


def grid(fam: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The (batches, poolings, dims) a lookup family is measured on."""
    if fam in GRID_FAMILIES:
        return GRID_BATCHES, GRID_POOLINGS, GRID_DIMS
    return BATCHES, POOLINGS, DIMS

# The gradient of a lookup whose update stays in XLA (ember.scatter_grad, not fused into an
# optimizer): its two forms, on a grid of table rows V, lookups L and dimension D.
GRAD_FAMILY = "scatter_grad/sum"
GRAD_FORMS = ("plain", "gathered")
GRAD_ROWS = (1_000, 10_000, 100_000, 1_000_000)
GRAD_LOOKUPS = (1_000, 10_000, 100_000, 1_000_000)
GRAD_DIMS = (16, 64, 128)
GRAD_POOLING = 10  # lookups per pooled row in the gathered form
GRAD_RULE = ("ember_xla/rewrites/gradient_rule.py: the measured points (the fit below is "
             "recorded, not used: its residuals are too large)")


def model_fn(op: str, batch: int):
    import jax
    import jax.numpy as jnp

    if op in ("segment_sum", "segment_max"):
        red = getattr(jax.ops, op)

        def f(t, i, s):
            return red(jnp.take(t, i, axis=0), s, num_segments=batch)

        return f

    def g(t, i):
        # max: clip mode, rewritten at every size of the grid (fill mode's 100-row bags below
        # YNNPACK's size stay in XLA: native/padded_order.py)
        rows = jnp.take(t, i, axis=0, mode="clip" if op == "max" else None)
        return jnp.sum(rows, axis=1) if op == "sum" else jnp.max(rows, axis=1)

    return g


def inputs_for(op: str, batch: int, pooling: int, dim: int, rng) -> list[np.ndarray]:
    table = rng.standard_normal((ROWS, dim), dtype=np.float32)
    if op.startswith("segment"):
        ids = rng.integers(0, ROWS, batch * pooling, dtype=np.int32)
        seg = np.repeat(np.arange(batch, dtype=np.int32), pooling)
        return [table, ids, seg]
    return [table, rng.integers(0, ROWS, (batch, pooling), dtype=np.int32)]


def measure(op: str, batch: int, pooling: int, dim: int, reps: int, rng) -> dict:
    """Median seconds of XLA's module and the rewritten one, alternating in this process."""
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    args = inputs_for(op, batch, pooling, dim, rng)
    module = from_jax(model_fn(op, batch), *args).module
    result = rewrite_module(module, cost_model=False)
    where = f"{op} B={batch} P={pooling} D={dim}"
    if len(result.clusters) != 1:
        raise SystemExit(f"{where}: expected one cluster, got {len(result.clusters)} "
                         f"({result.near_misses})")
    return {"B": batch, "P": pooling, "D": dim, "L": batch * pooling, "S": batch,
            **timed_against_xla(module, result.module, result.clusters, result.clusters[0],
                                args, where, reps)}


def grad_fn(form: str, pooled: int):
    """A loss's value and its gradient with respect to the table: the forward lookup (which the
    gradient pattern needs in the module) and the gradient, whose rows are ``m`` itself
    (plain: updates [L, D]) or ``m``'s rows gathered by segment id (gathered: the kernel reads
    the pooled gradient rows itself)."""
    import jax
    import jax.numpy as jnp

    if form == "plain":
        def f(t, m, r):
            return jax.value_and_grad(lambda t: jnp.sum(jnp.take(t, r, axis=0) * m))(t)

        return f

    def g(t, m, r, s):
        return jax.value_and_grad(lambda t: jnp.sum(jax.ops.segment_sum(
            jnp.take(t, r, axis=0), s, num_segments=pooled) * m))(t)

    return g


def grad_inputs(form: str, rows: int, lookups: int, dim: int, rng) -> list[np.ndarray]:
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    ids = rng.integers(0, rows, lookups, dtype=np.int32)
    if form == "plain":
        return [table, rng.standard_normal((lookups, dim), dtype=np.float32), ids]
    pooled = lookups // GRAD_POOLING
    seg = np.repeat(np.arange(pooled, dtype=np.int32), GRAD_POOLING)
    return [table, rng.standard_normal((pooled, dim), dtype=np.float32), ids, seg]


def measure_grad(form: str, rows: int, lookups: int, dim: int, reps: int, rng) -> dict:
    """XLA's module and the one whose table gradient is an unfused ``ember.scatter_grad``,
    alternating; both compute the loss (the forward lookup) too. In the gathered form the
    forward segment sum of the pooled rows also matches the gradient pattern (a scatter-add
    into [B, D] whose ids a gather of ``m`` reads): that call is put back into XLA, so only
    the table's gradient differs."""
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    args = grad_inputs(form, rows, lookups, dim, rng)
    module = from_jax(grad_fn(form, lookups // GRAD_POOLING), *args).module
    result = rewrite_module(module, cost_model=False)
    table_grads = [c for c in result.clusters if c["kind"] == "scatter_grad"
                   and c["table"].get("parameter_number") == 0]
    want_roles = {"plain": "updates", "gathered": "source_rows"}[form]
    where = f"{GRAD_FAMILY} {form} V={rows} L={lookups} D={dim}"
    if len(table_grads) != 1 or want_roles not in table_grads[0]["inputs"]:
        raise SystemExit(f"{where}: expected one {form} table gradient, got {result.clusters}")
    return {"form": form, "V": rows, "D": dim, "L": lookups, "S": rows,
            **timed_against_xla(module, result.module, result.clusters, table_grads[0], args,
                                where, reps)}


def calibrate_grad(reps: int, rng, argv: list[str] | None) -> dict:
    """The scatter_grad/sum family: measured on the grid, fitted as the lookup families (both
    forms in one fit; the per-form residuals are stored beside it), with the command, date
    and load average of this measurement."""
    load0 = os.getloadavg()[0]
    points = []
    for form, v, n, d in itertools.product(GRAD_FORMS, GRAD_ROWS, GRAD_LOOKUPS, GRAD_DIMS):
        m = measure_grad(form, v, n, d, reps, rng)
        points.append(m)
        print(f"{GRAD_FAMILY} {form:8s} V={v:7d} L={n:7d} D={d:3d}  XLA "
              f"{m['xla_s'] * 1e6:10.1f} us  ember {m['ember_s'] * 1e6:10.1f} us  ratio "
              f"{m['xla_s'] / m['ember_s']:.2f}x  load {os.getloadavg()[0]:.1f}", flush=True)
    entry = fitted(points)
    entry["decided_by"] = GRAD_RULE
    entry["forms_median_rel_residual"] = {
        form: {b: _median_residual(entry[b], [p for p in points if p["form"] == form],
                                   f"{b}{FIT_ON}") for b in ("xla", "ember")}
        for form in GRAD_FORMS}
    print(f"  per form: {entry['forms_median_rel_residual']}")
    entry["command"] = _command(argv)
    entry["date"] = _now()
    entry["load_average"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return entry


def _median_residual(coef: dict, points: list[dict], key: str) -> float:
    return float(np.median([abs(coef["c0_s"] + _single_work(coef, p) - p[key]) / p[key]
                            for p in points]))


def _nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (drop the most negative until none is)."""
    active = list(range(x.shape[1]))
    coef = np.zeros(x.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(x[:, active], y, rcond=None)
        if (sol >= 0).all():
            coef[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    return coef


COEFFICIENTS = ("c0_s", "per_lookup_elem_s", "per_output_elem_s", "per_lookup_s")
MODEL = ("t = c0_s + per_lookup_elem_s * lookups * D + per_output_elem_s * rows * D "
         "+ per_lookup_s * lookups")


def fit(points: list[dict], key: str) -> tuple[list[float], float]:
    """t = c0 + c1*L*D + c2*S*D + c3*L by non-negative least squares on relative error (rows
    weighted by 1/t), refitted once without the points whose relative residual is over 3x the
    median (timing spikes from other jobs on a shared machine); returns the coefficients and
    the median relative residual over all points. The per-lookup term c3 (index handling,
    XLA's scatter bookkeeping) is what separates small-D from large-D clusters."""
    x = np.array([[1.0, p["L"] * p["D"], p["S"] * p["D"], p["L"]] for p in points])
    return _robust_fit(x, np.array([p[key] for p in points]))


def _robust_fit(x: np.ndarray, y: np.ndarray) -> tuple[list[float], float]:
    """Non-negative least squares of ``x @ coef ~ y`` on relative error, refitted once without
    the points whose relative residual is over 3x the median; (coefficients, median relative
    residual over all points)."""
    w = 1.0 / y
    coef = _nnls(x * w[:, None], y * w)
    rel = np.abs(x @ coef - y) / y
    keep = rel <= 3 * max(float(np.median(rel)), 0.05)
    if keep.sum() >= 6 and not keep.all():
        coef = _nnls(x[keep] * w[keep, None], y[keep] * w[keep])
    rel = np.abs(x @ coef - y) / y
    return [float(c) for c in coef], float(np.median(rel))


def fitted(points: list[dict]) -> dict:
    entry: dict = {"points": points}
    for backend in ("xla", "ember"):
        coef, resid = fit(points, f"{backend}{FIT_ON}")
        entry[backend] = {**dict(zip(COEFFICIENTS, coef, strict=True)),
                          "median_rel_residual": resid}
        print(f"  fit {backend}: {entry[backend]}")
    return entry


def refit(source: Path, out: Path, argv: list[str] | None) -> int:
    """The stored measurements of ``source``, fitted again (same points, current model)."""
    doc = json.loads(source.read_text())
    for fam, entry in doc["families"].items():
        print(fam)
        doc["families"][fam] = {**entry, **fitted(entry["points"])}  # keeps its own notes
    if "grouped" in doc:
        print("grouped")
        doc["grouped"] = grouped_entry(doc["grouped"]["points"], doc["families"],
                                       doc["module_floor_s"]["value_s"])
    doc["model"] = MODEL
    doc["fitted_by"] = _command(argv)
    return _write(doc, out)


GROUPED_K = (2, 8, 26)
GROUPED_BATCHES = (1, 16, 256, 2048)
GROUPED_POOLINGS = (2, 10)
# D=128 is the DLRM stage's: its 26 tables of 20k rows (266 MB) are read from DRAM, where
# the single-cluster work terms (one 20k-row table, in L3) would only be extrapolated.
GROUPED_DIMS = (16, 64, 128)


def alternate_runs(run, keys, reps: int) -> dict[str, list[float]]:
    """Seconds per run of each key, alternating, ``reps`` samples each: ``run(key, n)`` runs
    ``key`` n times and returns seconds per run; enough inner runs per sample that the first
    key's sample lasts >= ~2 ms."""
    keys = list(keys)
    inner = max(1, min(200, int(2e-3 / max(run(keys[0], 1), 1e-6))))
    times: dict[str, list[float]] = {k: [] for k in keys}
    for _ in range(reps):
        for k in keys:
            times[k].append(run(k, inner))
    return times


def _alternate(exes: dict, on_device: list, reps: int) -> dict[str, list[float]]:
    """``alternate_runs`` of loaded executables, each run on the same inputs."""
    import jax

    def run(k: str, n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            outs = exes[k].execute(on_device)
        jax.block_until_ready(outs)
        return (time.perf_counter() - t) / n

    return alternate_runs(run, exes, reps)


def timed_against_xla(module, rewritten, clusters: list, chosen: dict, args: list, where: str,
                      reps: int, alternate=_alternate) -> dict[str, float]:
    """XLA's ``module`` against ``rewritten`` with every cluster but ``chosen`` put back into
    XLA: compiled, checked bit for bit (``where`` names the point when they differ) and timed
    by ``alternate(loaded, inputs, reps)``; the medians and minima in seconds."""
    import jax

    from ember_xla.ir.rewriter import PatternRewriter
    from ember_xla.rewrites.keep_in_xla import keep_in_xla
    from ember_xla.runtime.execute import compile_module

    rw = PatternRewriter()
    for c in clusters:
        if c is not chosen and c.get("custom_call"):
            keep_in_xla(rewritten, c["custom_call"], rw)
    loaded = {"xla": compile_module(module)._loaded, "ember": compile_module(rewritten)._loaded}
    outs = {k: [np.asarray(o) for o in ex.execute([jax.device_put(a) for a in args])]
            for k, ex in loaded.items()}
    for w, g in zip(outs["xla"], outs["ember"], strict=True):
        if w.tobytes() != g.tobytes():
            raise SystemExit(f"{where}: ember != XLA")
    times = alternate(loaded, [jax.device_put(a) for a in args], reps)
    return {"xla_s": statistics.median(times["xla"]), "ember_s": statistics.median(times["ember"]),
            "xla_min_s": min(times["xla"]), "ember_min_s": min(times["ember"]),
            "xla_q1_s": _lower_quartile(times["xla"]),
            "ember_q1_s": _lower_quartile(times["ember"])}


def _lower_quartile(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=4)[0] if len(samples) > 1 else samples[0]


def measure_floor(reps: int) -> dict:
    """The module floor: a module adding 1 to one s32, its fastest and median run."""
    import jax

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.runtime.execute import compile_module

    x = np.zeros((1,), np.int32)
    module = from_jax(lambda v: v + 1, x).module
    times = _alternate({"floor": compile_module(module)._loaded}, [jax.device_put(x)], reps)
    return {"value_s": min(times["floor"]), "median_s": statistics.median(times["floor"])}


def measure_grouped(k: int, batch: int, pooling: int, dim: int, reps: int, rng) -> dict:
    """XLA's k-table module (one result: the concatenated tables, so no per-output cost of
    the runtime is counted), its rewrite into one grouped call and into k separate calls,
    alternating."""
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import compile_module

    def f(*a):  # the DLRM layout: the pooled tables concatenated (one result)
        return jnp.concatenate([jax.ops.segment_sum(jnp.take(a[j], a[k + j], axis=0),
                                                    a[2 * k + j], num_segments=batch)
                                for j in range(k)], axis=1)

    per = [inputs_for("segment_sum", batch, pooling, dim, rng) for _ in range(k)]
    args = [p[0] for p in per] + [p[1] for p in per] + [p[2] for p in per]
    module = from_jax(f, *args).module
    result = rewrite_module(module, cost_model=False, group=True)
    if len(result.groups) != 1 or len(result.groups[0]["members"]) != k:
        raise SystemExit(f"grouped k={k} B={batch} P={pooling} D={dim}: expected one grouped "
                         f"call of {k} tables, got {result.groups}")
    separate = rewrite_module(module, cost_model=False, group=False).module
    exes = {"xla": compile_module(module)._loaded, "ember": compile_module(result.module)._loaded,
            "separate": compile_module(separate)._loaded}
    on_device = [jax.device_put(a) for a in args]
    want = np.asarray(exes["xla"].execute(on_device)[0])
    for name in ("ember", "separate"):
        if not np.array_equal(want, np.asarray(exes[name].execute(on_device)[0])):
            raise SystemExit(f"grouped k={k} B={batch} P={pooling} D={dim}: {name} != XLA")
    times = _alternate(exes, on_device, reps)
    return {"k": k, "B": batch, "P": pooling, "D": dim, "L": batch * pooling, "S": batch,
            **{f"{n}_s": statistics.median(v) for n, v in times.items()},
            **{f"{n}_min_s": min(v) for n, v in times.items()}}


def _single_work(coef: dict, p: dict) -> float:
    """One table's single-kernel time without its c0 (the model's work terms)."""
    return (coef["per_lookup_elem_s"] * p["L"] * p["D"] + coef["per_output_elem_s"] * p["S"]
            * p["D"] + coef.get("per_lookup_s", 0.0) * p["L"])


def fit_grouped(points: list[dict], single: dict, key: str) -> tuple[list[float], float]:
    """``t - k * work = c0 + per_table * k`` by non-negative least squares on relative error
    (as ``fit``); the coefficients and the median relative residual of ``t``."""
    y = np.array([p[key] for p in points])
    work = np.array([p["k"] * _single_work(single, p) for p in points])
    x = np.array([[1.0, p["k"]] for p in points])
    w = 1.0 / y
    coef = _nnls(x * w[:, None], (y - work) * w)
    rel = np.abs(x @ coef + work - y) / y
    return [float(c) for c in coef], float(np.median(rel))


def fit_k_tables(points: list[dict], key: str) -> tuple[list[float], float]:
    """XLA's k-table modules with coefficients of their own: ``t = c0 + per_table * k +
    k * (per_lookup_elem * L*D + per_output_elem * S*D + per_lookup * L)`` (as ``fit``)."""
    x = np.array([[1.0, p["k"], p["k"] * p["L"] * p["D"], p["k"] * p["S"] * p["D"],
                   p["k"] * p["L"]] for p in points])
    return _robust_fit(x, np.array([p[key] for p in points]))


K_TABLE_COEFFICIENTS = ("c0_s", "per_table_s", "per_lookup_elem_s", "per_output_elem_s",
                        "per_lookup_s")


def grouped_entry(points: list[dict], families: dict, floor_s: float) -> dict:
    """The fitted grouped-call entry, per backend (ember: the grouped call; xla: XLA's own
    k-table module); prints how far XLA's k-table time is from the floor plus the k single
    XLA predictions less their floors (why XLA's side is fitted on k-table modules too)."""
    single = families["segment_reduce/sum"]
    entry: dict = {"points": points}
    for backend in ("ember", "separate"):
        coef, resid = fit_grouped(points, single["ember"], f"{backend}{FIT_ON}")
        entry[backend] = {"c0_s": coef[0], "per_table_s": coef[1],
                          "median_rel_residual": resid}
    coef, resid = fit_k_tables(points, f"xla{FIT_ON}")
    entry["xla"] = {**dict(zip(K_TABLE_COEFFICIENTS, coef, strict=True)),
                    "median_rel_residual": resid}
    for backend in ("ember", "separate", "xla"):
        print(f"  fit k tables, {backend}: {entry[backend]}")
    xc = single["xla"]
    rel = [abs(floor_s + p["k"] * (xc["c0_s"] + _single_work(xc, p) - floor_s)
               - p[f"xla{FIT_ON}"]) / p[f"xla{FIT_ON}"] for p in points]
    entry["xla_additive_median_rel_residual"] = float(np.median(rel))
    print(f"  XLA k-table modules as the sum of single ones: median relative residual "
          f"{entry['xla_additive_median_rel_residual']:.3f}")
    return entry


def calibrate_grouped(doc: dict, reps: int, rng, argv: list[str] | None) -> None:
    """The module floor and the grouped calls, measured and fitted into ``doc`` with the
    command, date and load average of this measurement."""
    load0 = os.getloadavg()[0]
    floor = measure_floor(reps * 10)
    print(f"module floor {floor['value_s'] * 1e6:.2f} us (median {floor['median_s'] * 1e6:.2f})")
    points = []
    for k in GROUPED_K:
        for b in GROUPED_BATCHES:
            for pool in GROUPED_POOLINGS:
                for d in GROUPED_DIMS:
                    m = measure_grouped(k, b, pool, d, reps, rng)
                    points.append(m)
                    print(f"grouped k={k:2d} B={b:5d} P={pool:3d} D={d:3d}  XLA "
                          f"{m['xla_s'] * 1e6:9.1f} us  grouped {m['ember_s'] * 1e6:9.1f} us  "
                          f"separate {m['separate_s'] * 1e6:9.1f} us  ratio "
                          f"{m['xla_s'] / m['ember_s']:.2f}x", flush=True)
    doc["module_floor_s"] = floor
    doc["grouped"] = grouped_entry(points, doc["families"], floor["value_s"])
    doc["grouped_command"] = _command(argv)
    doc["grouped_date"] = _now()
    doc["grouped_load_average"] = [round(load0, 2), round(os.getloadavg()[0], 2)]


def _command(argv: list[str] | None) -> str:
    return "python benchmarks/calibrate_cost_model.py " + " ".join(
        argv if argv is not None else sys.argv[1:])


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--show", action="store_true", help="print only; write no file")
    p.add_argument("--families",
                   default=",".join([*FAMILIES, GRAD_FAMILY, *fused_updates.FAMILIES]),
                   help="comma-separated; a subset is measured into the existing --out (or "
                        "the package's file), keeping its other families")
    p.add_argument("--grouped-only", action="store_true",
                   help="measure only the module floor and the grouped calls; keep the single "
                        "families of --out (or the package's file)")
    p.add_argument("--refit", type=Path, default=None,
                   help="measure nothing: refit the points stored in this JSON file (written "
                        "by an earlier run) and write the result to --out")
    args = p.parse_args(argv)
    if args.refit is not None:
        return refit(args.refit, args.out, argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    rng = np.random.default_rng(0)
    load0 = os.getloadavg()[0]
    if args.grouped_only:
        doc = json.loads((args.out if args.out.exists() else OUT).read_text())
        calibrate_grouped(doc, args.reps, rng, argv)
        return 0 if args.show else _write(doc, args.out)
    wanted = args.families.split(",")
    known = [*FAMILIES, GRAD_FAMILY, *fused_updates.FAMILIES]
    unknown = [f for f in wanted if f not in known]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; known: {known}")
    if set(wanted) < set(known):
        doc = json.loads((args.out if args.out.exists() else OUT).read_text())
        for fam in wanted:
            doc["families"][fam] = _calibrate_family(fam, args.reps, rng, argv)
        if "segment_reduce/sum" in wanted and "grouped" in doc:
            # the grouped constants are fitted on the segment-sum line's work terms
            print("grouped (its stored points, refitted on the new segment_reduce/sum line)")
            doc["grouped"] = grouped_entry(doc["grouped"]["points"], doc["families"],
                                           doc["module_floor_s"]["value_s"])
        return 0 if args.show else _write(doc, args.out)
    families = {}
    for fam in wanted:
        if fam == GRAD_FAMILY or fam in fused_updates.FAMILIES:
            families[fam] = _calibrate_family(fam, args.reps, rng, argv)
            continue
        families[fam] = _lookup_family(fam, args.reps, rng)
    doc = {
        "format": 1,
        "model": MODEL,
        "command": _command(argv),
        "date": _now(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "table_rows": ROWS,
        "fit_on": FIT_ON,
        "families": families,
    }
    if "segment_reduce/sum" in families:
        calibrate_grouped(doc, args.reps, rng, argv)
    return 0 if args.show else _write(doc, args.out)


def _calibrate_family(fam: str, reps: int, rng, argv: list[str] | None) -> dict:
    """One family measured (and a lookup family fitted) alone, with the command, date and load
    average of this measurement."""
    if fam == GRAD_FAMILY:
        return calibrate_grad(reps, rng, argv)
    if fam in fused_updates.FAMILIES:
        return fused_updates.calibrate(fam, reps, rng, argv)
    load0 = os.getloadavg()[0]
    entry = _lookup_family(fam, reps, rng)
    entry.update(command=_command(argv), date=_now(),
                 load_average=[round(load0, 2), round(os.getloadavg()[0], 2)])
    return entry


def _lookup_family(fam: str, reps: int, rng) -> dict:
    """A lookup family measured on its grid and fitted (the fit marked unused where the
    decision reads the points)."""
    sizes = list(itertools.product(*grid(fam)))
    passes = GRID_PASSES if fam in GRID_FAMILIES else 1
    runs: list[list[dict]] = [[] for _ in sizes]
    for n in range(passes):
        for (b, pool, d), got in zip(sizes, runs, strict=True):
            m = measure(FAMILIES[fam], b, pool, d, reps, rng)
            got.append(m)
            print(f"{fam:20s} B={b:5d} P={pool:3d} D={d:3d}  XLA {m['xla_s'] * 1e6:9.1f} us"
                  f"  ember {m['ember_s'] * 1e6:9.1f} us  ratio "
                  f"{m['xla_s'] / m['ember_s']:.2f}x" + (f"  (pass {n + 1})" if passes > 1
                                                         else ""), flush=True)
    points = [_over_passes(got) for got in runs]
    entry = fitted(points)
    if fam in GRID_FAMILIES:
        entry["decided_by"] = GRID_RULE
    return entry


def _over_passes(runs: list[dict]) -> dict:
    """One point from its passes over the grid: per statistic the median over the passes
    (the minimum's minimum), so a disturbance of the shared machine during one pass moves
    none of them."""
    point = dict(runs[0])
    for key in runs[0]:
        if key.endswith("_s"):
            values = [r[key] for r in runs]
            point[key] = min(values) if key.endswith("_min_s") else statistics.median(values)
    return point


def _write(doc: dict, out: Path) -> int:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
