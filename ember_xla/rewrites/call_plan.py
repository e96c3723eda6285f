"""The cost decision per *call*: which clusters share one table-batched call, which become
separate calls and which stay in XLA, chosen by the predicted time of each alternative.

Clusters that could share a grouped call (``group_tables.group_key``, independent of one
another) are planned together: a grouped call pays its fixed cost once, where separate calls
pay one each and XLA's own code for each cluster costs its marginal time in the module. From
the measured model (``cost_model.json``, ``profitability``; ``benchmarks/calibrate_cost_model.py``
measures modules of k = 2..26 tables each way):

- a grouped call of the tables ``S``: ``c0 + sum over S of (per_table + work(c))``, where
  ``work(c)`` is the single kernel's time of ``c`` without its fixed cost by its family's
  fitted line (also where the measured grid judges single clusters: the grouped constants
  are fitted on the line's terms) and ``c0``/``per_table`` are fitted on measured grouped
  calls;
- XLA's module of the same tables: ``c0 + sum over S of (per_table + its work terms)``, all
  fitted on measured k-table modules (they are not the sum of one-cluster modules);
- separate calls: ``c0 + sum over S of (per_table + work(c))`` with the constants fitted
  on measured modules of k separate calls.

A table joins the grouped call when its cost inside the call is below its cost in XLA; the
grouped call is made when it is predicted ``MARGIN`` faster than XLA for those tables and no
slower than separate calls for them. Every other cluster is decided alone
(``profitability.split``). Predictions are in seconds; the report rounds them to us.
"""

from __future__ import annotations

import dataclasses

from ember_xla.rewrites import profitability
from ember_xla.rewrites.cluster import Cluster, NearMiss
from ember_xla.rewrites.group_tables import group_key, independent_groups


@dataclasses.dataclass
class CallPlan:
    rewrite: list[Cluster]                               # clusters to outline
    kept: list[tuple[NearMiss, dict[str, float]]]        # kept in XLA, with predictions
    predictions: dict[int, dict[str, float]]             # single predictions by id(cluster)
    grouped: set[int]                                    # id(cluster) planned into groups
    decisions: dict[int, str] = dataclasses.field(default_factory=dict)  # grouped | separate


def _grouped_model() -> dict | None:
    model = profitability.load_model()
    if "grouped" not in model:
        return None
    return model["grouped"]


def _work(c: Cluster, p: dict[str, float]) -> float:
    """The single kernel's predicted time of ``c`` without its fixed cost (``p``: the family's
    fitted line, ``profitability.fitted_prediction``, on whose terms the grouped model is
    fitted)."""
    fam = profitability.load_model()["families"][profitability.family(c)]
    return p["ember"] - fam["ember"]["c0_s"]


def _in_group(c: Cluster, p: dict[str, float], g: dict) -> tuple[float, float]:
    """(seconds ``c`` adds to a grouped call, seconds it adds to XLA's module of k tables)."""
    x = g["xla"]
    s = profitability.sizes(c)
    xla = (x["per_table_s"] + x["per_lookup_elem_s"] * s["L"] * s["D"]
           + x["per_output_elem_s"] * s["S"] * s["D"] + x["per_lookup_s"] * s["L"])
    return g["ember"]["per_table_s"] + _work(c, p), xla


def group_times(members: list[Cluster]) -> dict[str, float] | None:
    """Predicted seconds of ``members`` as one grouped call, as separate calls and in XLA
    (each as the time of a module holding only them), or None without a model for them."""
    g = _grouped_model()
    preds = [profitability.fitted_prediction(c) for c in members]
    if g is None or any(p is None for p in preds):
        return None
    parts = [_in_group(c, p, g) for c, p in zip(members, preds, strict=True)]
    sep = g["separate"]
    return {"grouped": g["ember"]["c0_s"] + sum(e for e, _ in parts),
            "separate_calls": sep["c0_s"] + sum(sep["per_table_s"] + _work(c, p)
                                                for c, p in zip(members, preds, strict=True)),
            "xla": g["xla"]["c0_s"] + sum(x for _, x in parts)}


def candidate_groups(clusters: list[Cluster]) -> list[list[Cluster]]:
    """Clusters that ``group_tables`` would batch into one call if all were rewritten."""
    by_root = {id(c.root): c for c in clusters}
    items = []
    for c in clusters:
        key = group_key(c.kind, c.attrs) if c.direction == "forward" else None
        if key is not None:
            items.append(((id(c.root.parent), key), c))
    items.sort(key=lambda kc: (id(kc[1].root.parent), kc[1].root.parent.index_of(kc[1].root)))
    groups = independent_groups([(k, c.root) for k, c in items])
    return [[by_root[id(r)] for r in grp] for grp in groups]


def _joins(c: Cluster, g: dict) -> bool:
    p = profitability.fitted_prediction(c)
    if p is None or profitability.unmodelled_slow(c) is not None:
        return False
    grouped, xla = _in_group(c, p, g)
    return grouped < xla


def plan_calls(clusters: list[Cluster], group: bool) -> CallPlan:
    """The per-call decision over every cluster found (the cost model is on)."""
    g = _grouped_model() if group else None
    grouped: list[Cluster] = []
    decisions: dict[int, str] = {}
    for cand in candidate_groups(clusters) if g is not None else []:
        members = [c for c in cand if _joins(c, g)]
        t = group_times(members) if len(members) > 1 else None
        if t is None or t["grouped"] > (1.0 - profitability.MARGIN) * t["xla"] \
                or t["grouped"] > t["separate_calls"]:
            continue
        grouped += members
        decisions.update((id(c), "grouped") for c in members)
    ids = {id(c) for c in grouped}
    alone, kept, predictions = profitability.split([c for c in clusters if id(c) not in ids])
    for c in grouped:
        p = profitability.predict(c)
        if p is not None:
            predictions[id(c)] = p
    decisions.update((id(c), "separate") for c in alone)
    order = {id(c): i for i, c in enumerate(clusters)}
    rewrite = sorted(alone + grouped, key=lambda c: order[id(c)])
    return CallPlan(rewrite, kept, predictions, ids, decisions)
