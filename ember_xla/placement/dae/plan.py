"""A placement of a model's clusters on the cores of a DAE target: pieces (a share of one
cluster's batch, the output rows ``[start, stop)``, with one program variant, on one core; a
core runs its pieces in the plan's order), its predicted time per core, and its JSON form
(``--placement=FILE.json`` reads what ``--placement_out`` wrote)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class DaePiece:
    cluster: int                   # index among the model's ember calls
    start: int
    stop: int
    core: int
    variant: str


@dataclasses.dataclass
class DaePlan:
    policy: str
    target: str
    cores: int
    pieces: list[DaePiece]
    predicted: list[float] = dataclasses.field(default_factory=list)   # cycles per core
    predicted_makespan: float = 0.0
    bound: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"format": "ember-xla-dae-plan", "version": 1, "policy": self.policy,
                "target": self.target, "cores": self.cores,
                "pieces": [dataclasses.asdict(p) for p in self.pieces],
                "predicted_cycles_per_core": self.predicted,
                "predicted_makespan_cycles": self.predicted_makespan, "bound": self.bound}


class BadPlan(ValueError):
    """A plan file that is not a DAE plan for this model and target (one line: why)."""


def read_plan(path: str | Path) -> DaePlan:
    try:
        d = json.loads(Path(path).read_text())
    except OSError as e:
        raise BadPlan(f"{path}: cannot read the plan ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise BadPlan(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(d, dict) or d.get("format") != "ember-xla-dae-plan":
        raise BadPlan(f"{path}: not a DAE placement plan (expected \"format\": "
                      "\"ember-xla-dae-plan\", as --placement_out writes)")
    try:
        pieces = [DaePiece(int(p["cluster"]), int(p["start"]), int(p["stop"]), int(p["core"]),
                           str(p["variant"])) for p in d["pieces"]]
        return DaePlan(str(d.get("policy", "file")), str(d["target"]), int(d["cores"]), pieces)
    except (KeyError, TypeError, ValueError) as e:
        raise BadPlan(f"{path}: malformed plan ({type(e).__name__}: {e})") from None


def check_plan(plan: DaePlan, rows: list[int], variants: list[list[str]], cores: int,
               where: str = "plan") -> None:
    """Every cluster's rows covered exactly once, cores and variants known; ``BadPlan``."""
    if plan.cores != cores:
        raise BadPlan(f"{where}: made for {plan.cores} cores, the target has {cores}")
    cover: list[list[tuple[int, int]]] = [[] for _ in rows]
    for p in plan.pieces:
        if not 0 <= p.cluster < len(rows):
            raise BadPlan(f"{where}: cluster {p.cluster} is not one of the model's "
                          f"{len(rows)} placed clusters")
        if not 0 <= p.core < cores:
            raise BadPlan(f"{where}: core {p.core} is not one of the {cores} cores")
        if p.variant not in variants[p.cluster]:
            raise BadPlan(f"{where}: cluster {p.cluster} has no variant {p.variant!r} "
                          f"(it has {', '.join(variants[p.cluster])})")
        if not 0 <= p.start < p.stop <= rows[p.cluster]:
            raise BadPlan(f"{where}: cluster {p.cluster}: rows [{p.start}, {p.stop}) are not "
                          f"within its {rows[p.cluster]} rows")
        cover[p.cluster].append((p.start, p.stop))
    for k, spans in enumerate(cover):
        at = 0
        for s, e in sorted(spans):
            if s != at:
                raise BadPlan(f"{where}: cluster {k}: rows from {at} are "
                              f"{'covered twice' if s < at else 'not covered'}")
            at = e
        if at != rows[k] and rows[k] > 0:
            raise BadPlan(f"{where}: cluster {k}: rows from {at} are not covered")
