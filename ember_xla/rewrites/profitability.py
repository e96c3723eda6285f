"""Never slower: per cluster, predict the time of the ember kernel and of XLA:CPU's own code for
the same cluster from a measured cost model, and keep the cluster in XLA when XLA is predicted
faster (the report lists it as a near-miss with both predicted times). Clusters that can
share a grouped call are first planned together by call_plan.py; this judges the others alone.

The model (``cost_model.json`` next to this file, written by
``benchmarks/calibrate_cost_model.py``, which records its command, date and raw measurements)
is per family (kind x combiner class) and per backend:
``t = c0 + per_lookup_elem * lookups * D + per_output_elem * rows * D + per_lookup * lookups``:
per-call overhead, gather-and-reduce work, output work, per-index work. Padded sum/mean bags
(``padded_bag/sum``) are read off their measured points instead (measured_grid.py, in batch,
pooling and D; the entry's ``decided_by``): XLA:CPU's time for them jumps between sizes and
its samples are bimodal, so the fit on each point's fastest run under-predicted XLA up to ~6x
(a B=256, P=5, D=16 bag: fitted 19.8 us, measured median 122 us).
Their second statistic is the lower quartile, not the minimum: XLA's fastest 2-ms window is a
state it seldom runs in. A lookup of a table
computed on every call by an op XLA fuses into its gather (``FUSED_INTO_GATHER``: flax
``nn.Embed(dtype=bfloat16)`` converting its f32 table, a GNN's ``h * norm[:, None]`` gathered
along the edges, a slice of a stack that canonicalization left) costs the kernel path also
the table written out first, which XLA, fusing the op into its gather, never writes: that
write is predicted at the kernel's own measured cost per output element
(``per_output_elem_s``) times the table's elements (``computed_table_s``; checked against
``benchmarks/bench_computed_table.py``: docs/BENCHMARKS.md). A cluster is rewritten
only when the kernel is predicted faster by more than ``MARGIN`` (predicted ember time
<= 0.75 x XLA's, i.e. >= 1.33x faster): the
XLA fits' median relative residual is 0.28-0.30 (0.32-0.37 in an earlier calibration on
another machine), and clusters predicted 1.06-1.3x faster
measured 0.77-1.0x (the B=1 26-table stage, segment_max D=256: docs/BENCHMARKS.md); ties and
near-ties stay in XLA. The environment variable ``EMBER_XLA_COST_MODEL=off``
(or ``rewrite_module(..., cost_model=False)``, ``ember-xla rewrite --rewrite_all``) rewrites
every cluster regardless.

Kinds the fit does not describe and that measured slower stay in XLA with their own reason
(``unmodelled_slow``): f16 tables, padded bags of bf16 input tables, weighted f16 blocked bags,
XLA:CPU's scatter folds and TF/Keras sparse applies (``ember.ordered_scatter``).

The gradient of a lookup (``scatter_grad``) is judged later, during optimizer fusion
(rewrites/pipeline.py), by measured grids read by gradient_rule.py (the linear model fits them
poorly): the update of a table the caller keeps is fused only when the fused call is
predicted ``MARGIN`` faster than XLA's scatter and dense update (``fused_prediction``: the
``sparse_update/<optimizer>`` family, by form, table rows V, lookups L and D; a donated
table's is always fused, see ``JUDGE_DONATED``); an unfused gradient stays rewritten only when
predicted ``MARGIN`` faster than XLA's scatter (``gradient_prediction``: the
``scatter_grad/sum`` family), else keep_in_xla.py puts it back.
"""

from __future__ import annotations

import functools
import json
import math
import os
from importlib import resources
from typing import Any

from ember_xla.hlo.opcodes import ELEMENTWISE
from ember_xla.ir.operation import Operation
from ember_xla.rewrites import gradient_rule, measured_grid
from ember_xla.rewrites.cluster import Cluster, NearMiss

MODEL_FILE = "cost_model.json"
# Rewrite only when predicted ember time <= (1 - MARGIN) * predicted XLA time.
MARGIN = 0.25
# The sizes of a family read off its measured points (its entry has ``decided_by``): batch
# (output rows), pooling (lookups per row) and D.
GRID_KEYS = ("B", "P", "D")
# Kinds judged after optimizer fusion (pipeline.py), not by ``split``/``predict``.
DEFERRED = ("scatter_grad",)


def enabled() -> bool:
    """The default of ``rewrite_module``'s ``cost_model``: on unless EMBER_XLA_COST_MODEL=off."""
    return os.environ.get("EMBER_XLA_COST_MODEL", "on").lower() not in ("off", "0", "false")


@functools.cache
def load_model() -> dict[str, Any]:
    text = resources.files("ember_xla.rewrites").joinpath(MODEL_FILE).read_text()
    return json.loads(text)


def family(c: Cluster) -> str:
    combiner = str(c.attrs.get("combiner", "sum"))
    return f"{c.kind}/{'max' if combiner in ('max', 'min') else 'sum'}"


def _count(shape: Any) -> int:
    return math.prod(int(d) for d in shape.dims)


def sizes(c: Cluster) -> dict[str, int]:
    """lookups L (elements of the lookup operand), output rows S, dimension D."""
    lookup = c.inputs[1]
    out = c.root.result.type
    return {"L": _count(lookup.type), "S": int(out.dims[0]) if out.dims else 1,
            "D": int(c.table.type.dims[1])}


def _time(coef: dict[str, float], s: dict[str, int]) -> float:
    return (coef["c0_s"] + coef["per_lookup_elem_s"] * s["L"] * s["D"]
            + coef["per_output_elem_s"] * s["S"] * s["D"]
            + coef.get("per_lookup_s", 0.0) * s["L"])


def _family_entry(c: Cluster, model: dict[str, Any] | None) -> dict[str, Any] | None:
    """The model's entry for a forward cluster's family (None: deferred, or no family)."""
    if c.kind in DEFERRED:
        return None
    return (model or load_model())["families"].get(family(c))


def predict(c: Cluster, model: dict[str, Any] | None = None) -> dict[str, float] | None:
    """Predicted seconds {"ember": ..., "xla": ...} for the cluster alone, or None when the
    model has no family for it (then the cluster is rewritten, as without a model)."""
    fam = _family_entry(c, model)
    if fam is None or "decided_by" not in fam:
        return fitted_prediction(c, model)
    s = sizes(c)
    p = measured_grid.predict(fam["points"], GRID_KEYS, GRID_KEYS,
                              {"B": s["S"], "P": s["L"] / max(s["S"], 1), "D": s["D"]},
                              robust="_q1_s")
    return {"ember": p["ember"] + computed_table_s(c, fam), "xla": p["xla"]}


def fitted_prediction(c: Cluster, model: dict[str, Any] | None = None
                      ) -> dict[str, float] | None:
    """The family's fitted line at the cluster's sizes, whichever rule judges the cluster
    alone: the grouped-call model (call_plan.py) is fitted on these work terms."""
    fam = _family_entry(c, model)
    if fam is None:
        return None
    s = sizes(c)
    return {"ember": _time(fam["ember"], s) + computed_table_s(c, fam),
            "xla": _time(fam["xla"], s)}


def gradient_sizes(c: Cluster) -> dict[str, int]:
    """A table gradient's lookups L (ids of its index operand), output rows S (the table's V)
    and dimension D."""
    out = c.root.result.type
    return {"L": _count(c.inputs[0].type), "S": int(out.dims[0]), "D": int(out.dims[1])}


def gradient_prediction(c: Cluster, model: dict[str, Any] | None = None
                        ) -> dict[str, float] | None:
    """Predicted seconds {"ember": ..., "xla": ...} of an unfused table gradient by the
    measured rule of gradient_rule.py, or None when the model has no scatter_grad family."""
    model = model or load_model()
    fam = model["families"].get(family(c))
    if fam is None:
        return None
    s = gradient_sizes(c)
    return gradient_rule.predict(fam["points"], gradient_rule.form_of(c.input_roles),
                                 s["S"], s["L"], s["D"])


#: The ``sparse_update`` family whose kernel runs each fused optimizer (Keras' Adagrad is the
#: Adagrad kernel with its own row formula).
UPDATE_FAMILIES = {"sgd": "sparse_update/sgd", "adagrad": "sparse_update/adagrad",
                   "adagrad_keras": "sparse_update/adagrad",
                   "rowwise_adagrad": "sparse_update/rowwise_adagrad"}


#: Whether the measured grid judges updates of donated tables. Not yet: on the 26-table
#: training step (benchmarks/bench_train.py, donated, 1M rows) every update fused ran 193.5 ms
#: (SGD) and 225.9 ms (rowwise Adagrad) per step, against 228.4 and 307.7 ms with the updates
#: the single-table grid predicts slower left in XLA (docs/BENCHMARKS.md): its donated points do
#: not describe updates inside a whole step yet, so a donated table's update is always fused.
JUDGE_DONATED = False


def fused_prediction(c: Cluster, optimizer: str, donated: bool,
                     model: dict[str, Any] | None = None) -> dict[str, float] | None:
    """Predicted seconds {"ember": ..., "xla": ...} of gradient cluster ``c`` fused with its
    ``optimizer`` update (``donated``: the table updated in place) against XLA's scatter and
    dense update, or None when the model has no family for it, or does not judge it (a donated
    table while ``JUDGE_DONATED`` is off: then the update is fused)."""
    if donated and not JUDGE_DONATED:
        return None
    model = model or load_model()
    fam = model["families"].get(UPDATE_FAMILIES.get(optimizer, ""))
    if fam is None:
        return None
    s = gradient_sizes(c)
    return gradient_rule.predict(fam["points"], gradient_rule.form_of(c.input_roles),
                                 s["S"], s["L"], s["D"], donated)


def fused_kept(c: Cluster, optimizer: str, donated: bool,
               p: dict[str, float] | None) -> str | None:
    """Why ``optimizer``'s update of gradient ``c`` is not fused (predicted not ``MARGIN``
    faster than XLA), or None when it is."""
    if p is None or p["ember"] <= (1.0 - MARGIN) * p["xla"]:
        return None
    return (f"kept in XLA: the fused {optimizer} update is predicted {us(p['ember'])} vs XLA's "
            f"scatter and dense update {us(p['xla'])}, not {MARGIN:.0%} faster "
            f"({UPDATE_FAMILIES[optimizer]}, {gradient_sizes(c)}, table "
            f"{'donated' if donated else 'kept by the caller'})")


def gradient_kept(c: Cluster, p: dict[str, float] | None) -> NearMiss | None:
    """The near-miss of an unfused table gradient predicted not ``MARGIN`` faster than XLA,
    or None when it stays rewritten."""
    if p is None or p["ember"] <= (1.0 - MARGIN) * p["xla"]:
        return None
    return NearMiss(c.pattern, c.root,
                    f"kept in XLA: predicted native {us(p['ember'])} vs XLA {us(p['xla'])}, "
                    f"not {MARGIN:.0%} faster ({family(c)}, {gradient_sizes(c)}; "
                    f"{'unfused gradient' if c.direction == 'backward' else 'scatter-add'})",
                    direction=c.direction)


#: XLA:CPU's fold of A + scatter-add(0, ids, rows) (patterns/scatter_fold.py) is XLA's own
#: serial scatter onto A: the ordered scatter can only add the cores, and measured it is not
#: faster (docs/BENCHMARKS.md, benchmarks/bench_scatter_fold.py).
FOLD_KEPT = ("kept in XLA: XLA:CPU folds A + scatter-add(0, ids, rows) into its own serial "
             "scatter onto A, which ember.ordered_scatter computes the same way; measured "
             "0.31-1.95x of XLA:CPU under load (identical modules: 0.65-1.79x), not in the "
             "cost model; "
             "rewritten with the cost model off")


#: A TF/Keras sparse apply (patterns/sparse_apply.py: the optimizer's scatter into the
#: variable) is XLA's own serial in-place scatter too; measured slower as the call.
SPARSE_APPLY_KEPT = ("kept in XLA: a TF/Keras sparse apply (the optimizer's scatter into the "
                     "variable) is XLA:CPU's own in-place scatter, which ember.ordered_scatter "
                     "computes the same way; measured 0.88x of XLA:CPU as the call on a "
                     "Keras SGD step (20,000 x 32, B=256 P=8; 0.95-1.06x at 200,000 x 64, "
                     "B=2048 P=20: benchmarks/bench_sparse_apply.py), not in the cost model; "
                     "rewritten with the cost model off")


#: f16 tables: outside the vector paths below, the kernels convert each f16 value (and round
#: each f16 sum) in scalar code; the cost model's families are f32 measurements.
F16_KEPT = ("kept in XLA: f16 tables are not in the cost model, and outside unweighted padded "
            "bags summed in f32 and unweighted segment sums (D a multiple of 8) the kernels "
            "convert f16 values in scalar code: weighted f16 bags measured 0.18-0.80x of "
            "XLA:CPU (100,000 x 16-128, B=256-2048, P=4-32, benchmarks/bench_half_tables.py); "
            "rewritten with the cost model off")

#: bf16 padded bags outside the vector paths below: not in the cost model, and the scalar
#: path they took measured slower than XLA:CPU at some sizes. bf16 segment sums measured
#: faster.
BF16_BAG_KEPT = ("kept in XLA: padded bags of bf16 tables summed in bf16, added in another "
                 "order than blocked, sequential or (weighted) sequential FMA, or of D not a "
                 "multiple of 8 are not in the cost model (the scalar path measured 0.44-1.81x "
                 "of XLA:CPU, benchmarks/bench_half_tables.py); rewritten with the cost model "
                 "off")


def vector_half(c: Cluster) -> bool:
    """A cluster over an f16/bf16 table, D a multiple of 8, on a vector path of the kernels:
    a padded bag summed in f32 (jnp.sum's upcast), unweighted in the blocked or sequential
    order (the AVX2 paths widen 8 halves at a time: blocked_sum.cc; reduce.cc with F16C) or a
    bf16 one weighted in the sequential FMA order (the product exact in f32); an unweighted
    f16 segment sum (each f16 add rounded with F16C). Measured 1.25-5.55x of XLA:CPU for the
    unweighted bags, 1.12-3.92x weighted bf16, 0.93-5.80x f16 segment sums, at 100,000 x
    16-128, B=64-2048, P=4-32 (benchmarks/bench_half_tables.py), so the cost model judges it
    as the f32 cluster it reads like."""
    et = c.table.type.element_type
    if et not in ("f16", "bf16") or c.table.type.dims[1] % 8:
        return False
    weighted = c.attrs.get("weighted")
    if c.kind == "segment_reduce":
        return et == "f16" and not weighted and c.attrs.get("combiner") == "sum"
    if c.kind != "padded_bag" or c.root.result.type.element_type != "f32":
        return False
    order = c.attrs.get("sum_order")
    if weighted:
        return et == "bf16" and order == "sequential_fma"
    return order in ("blocked", "sequential")


def unmodelled_slow(c: Cluster) -> str | None:
    """Why a cluster whose kernel path no family of the model describes, and which is measured
    slower than XLA:CPU, stays in XLA; None for the others."""
    if c.kind == "padded_bag" and c.attrs.get("weighted") and \
            c.attrs.get("sum_order") == "blocked" and c.table.type.element_type == "f16":
        return ("kept in XLA: weighted f16 padded bags summed in YNNPACK's blocked order are "
                "not in the cost model and measured 0.12-0.62x of XLA:CPU "
                "(benchmarks/padded_order_speed.py)")
    if vector_half(c):
        return None
    if c.table.type.element_type == "f16":
        return F16_KEPT
    if c.kind == "padded_bag" and c.table.type.element_type == "bf16" and \
            computed_table(c) is None:  # a computed one: measured, bench_computed_table.py
        return BF16_BAG_KEPT
    if c.kind == "ordered_scatter" and c.root.opcode == "add":
        return f"{FOLD_KEPT} ({c.root.name})"
    if c.kind == "ordered_scatter":
        return f"{SPARSE_APPLY_KEPT} ({c.root.name})"
    return None


#: Ops XLA:CPU fuses into the gather that reads their result (computing only the rows looked
#: up) but writes out whole when their result is a custom call's operand: elementwise ops and
#: the data movers (a table sliced out of a stack in a ``lax.map``/``scan`` body, a
#: concatenation of tables).
FUSED_INTO_GATHER = ELEMENTWISE | {"broadcast", "concatenate", "dynamic-slice", "pad",
                                   "reverse", "slice", "transpose"}


def computed_table(c: Cluster) -> Operation | None:
    """The op computing a forward cluster's table on every call that XLA would fuse into the
    gather (flax ``nn.Embed(dtype=jnp.bfloat16)`` converts its f32 table, Keras' mixed precision
    casts it, a GNN scales its node features, a loop body slices its table out of a stack),
    seen through reshapes, or None: XLA computes only the rows looked up, while the kernel
    needs the whole computed table written out first."""
    if c.direction == "backward" or not c.input_roles or c.input_roles[0] != "table":
        return None
    producer = c.table.owner
    while producer is not None and producer.opcode in ("reshape", "bitcast"):
        producer = producer.operands[0].owner
    return producer if producer is not None and producer.opcode in FUSED_INTO_GATHER else None


def computed_table_s(c: Cluster, fam: dict[str, Any]) -> float:
    """Seconds the kernel path adds by having XLA write a computed table out: its elements
    at the kernel's measured cost per output element (0 for a table that is an input)."""
    if computed_table(c) is None:
        return 0.0
    return fam["ember"]["per_output_elem_s"] * _count(c.table.type)


def _computed_note(c: Cluster) -> str:
    op = computed_table(c)
    if op is None:
        return ""
    return (f"; the table is computed on every call ({op.opcode} {op.name}, {c.table.type}): "
            "XLA:CPU fuses it into the gather, the native path writes it out first")


def us(x: float) -> str:
    return f"{x * 1e6:.1f} us"


def split(clusters: list[Cluster]) -> tuple[list[Cluster],
                                            list[tuple[NearMiss, dict[str, float]]],
                                            dict[int, dict[str, float]]]:
    """(clusters to rewrite, (near-miss, prediction) for those kept in XLA, predictions of the
    clusters to rewrite by id(cluster))."""
    keep, kept, predictions = [], [], {}
    for c in clusters:
        why = unmodelled_slow(c)
        if why is not None:
            backward = "backward" if c.direction == "backward" else None
            kept.append((NearMiss(c.pattern, c.root, why, backward), {}))
            continue
        p = predict(c)
        if p is not None and p["ember"] > (1.0 - MARGIN) * p["xla"]:
            kept.append((NearMiss(c.pattern, c.root,
                                  f"kept in XLA: predicted native {us(p['ember'])} vs XLA "
                                  f"{us(p['xla'])}, not {MARGIN:.0%} faster "
                                  f"({family(c)}, {sizes(c)}{_computed_note(c)})"), p))
            continue
        if p is not None:
            predictions[id(c)] = p
        keep.append(c)
    return keep, kept, predictions
