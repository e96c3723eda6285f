"""A placement plan: which core pools which bags of which table, with which lookup strategy and
how many hot rows in that core's L1. Plans are JSON (saved atomically, reloadable) and are
checked against the model and the target before use: every bag exactly once, cores and
strategies valid, the scratchpad never over-full — a plan that cannot fit is refused with the
reason. Each bag stays whole on one core, so its lookups are pooled in index order whatever
the plan: the outputs do not depend on it (tests/placement)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from ember_xla.emulator.npu.run import Work
from ember_xla.machines.npu import L1_STRATEGIES, STRATEGIES, Machine
from ember_xla.util import strict_json
from ember_xla.util.atomic import write_atomic
from ember_xla.util.input_files import open_regular

FORMAT = "ember-xla-placement-plan/1"


class PlanError(ValueError):
    """A plan that does not match the model or does not fit the target (message: why)."""


@dataclasses.dataclass(frozen=True)
class Piece:
    table: int
    bag_start: int
    bag_stop: int
    core: int
    strategy: str
    hot: int = 0              # rows of ``Plan.resident[table]`` held in this core's L1


@dataclasses.dataclass
class Plan:
    policy: str
    target: str
    cores: int
    preload: str
    tables: list[dict[str, Any]]          # name, rows, dim, bags: what the plan was made for
    pieces: list[Piece]
    resident: dict[int, list[int]]        # per table: rows in hotness order (prefix = hot set)
    predicted: list[float] = dataclasses.field(default_factory=list)   # cycles per core
    mapper_seconds: float = 0.0
    solver: dict[str, Any] = dataclasses.field(default_factory=dict)  # optimum: HiGHS status

    # -- derived ---------------------------------------------------------------------------
    def core_resident(self, c: int) -> dict[int, np.ndarray]:
        """Rows each table keeps in core ``c``'s L1 (largest hot set of its pieces there)."""
        h: dict[int, int] = {}
        for p in self.pieces:
            if p.core == c and p.strategy in L1_STRATEGIES and p.hot:
                h[p.table] = max(h.get(p.table, 0), p.hot)
        return {t: np.asarray(self.resident[t][:n], dtype=np.int64) for t, n in h.items()}

    def programs(self) -> tuple[list[list[Work]], list[dict[int, np.ndarray]]]:
        progs: list[list[Work]] = [[] for _ in range(self.cores)]
        for p in self.pieces:
            progs[p.core].append(Work(p.table, p.bag_start, p.bag_stop, p.strategy))
        return progs, [self.core_resident(c) for c in range(self.cores)]

    def l1_used(self, c: int) -> int:
        return sum(len(r) * self.tables[t]["dim"] * 4 for t, r in self.core_resident(c).items())

    # -- checks -----------------------------------------------------------------------------
    def check(self, m: Machine, tables: list[dict[str, Any]] | None = None) -> None:
        if self.cores > m.cores:
            raise PlanError(f"plan uses {self.cores} cores; the target has {m.cores}")
        if tables is not None:
            if len(tables) != len(self.tables):
                raise PlanError(f"plan is for {len(self.tables)} tables; the model has "
                                f"{len(tables)}")
            for i, (a, b) in enumerate(zip(self.tables, tables, strict=True)):
                if a != b:
                    raise PlanError(f"table {i}: plan was made for {a}, the model has {b}")
        seen = [np.zeros(t["bags"], dtype=np.int32) for t in self.tables]
        for i, p in enumerate(self.pieces):
            where = f"piece {i}"
            if not 0 <= p.table < len(self.tables):
                raise PlanError(f"{where}: table {p.table} does not exist")
            t = self.tables[p.table]
            if not 0 <= p.core < self.cores:
                raise PlanError(f"{where}: core {p.core} outside [0, {self.cores})")
            if p.strategy not in STRATEGIES:
                raise PlanError(f"{where}: strategy {p.strategy!r}: expected one of "
                                f"{', '.join(STRATEGIES)}")
            if not 0 <= p.bag_start <= p.bag_stop <= t["bags"]:
                raise PlanError(f"{where}: bags [{p.bag_start}, {p.bag_stop}) outside "
                                f"[0, {t['bags']}) of table {t['name']}")
            if p.hot < 0 or p.hot > len(self.resident.get(p.table, [])) or (
                    p.hot and p.strategy not in L1_STRATEGIES):
                raise PlanError(f"{where}: hot = {p.hot}: expected 0 for {p.strategy}, at "
                                f"most the {len(self.resident.get(p.table, []))} resident rows "
                                "listed for an L1 strategy")
            seen[p.table][p.bag_start:p.bag_stop] += 1
        for t, s in zip(self.tables, seen, strict=True):
            if np.any(s != 1):
                b = int(np.nonzero(s != 1)[0][0])
                raise PlanError(f"table {t['name']}: bag {b} is assigned {int(s[b])} times "
                                "(expected exactly once)")
        for c in range(self.cores):
            used = self.l1_used(c)
            if used > m.l1_bytes:
                raise PlanError(f"core {c}: L1-resident rows need {used} bytes; the "
                                f"scratchpad holds {m.l1_bytes} bytes")

    # -- JSON -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "policy": self.policy, "target": self.target,
                "cores": self.cores, "preload": self.preload, "tables": self.tables,
                "pieces": [dataclasses.asdict(p) for p in self.pieces],
                "resident": {str(k): [int(r) for r in v] for k, v in self.resident.items()},
                "predicted_cycles": [float(x) for x in self.predicted],
                "mapper_seconds": self.mapper_seconds}

    def save(self, path: str | Path) -> None:
        """Write atomically (``util.atomic.write_atomic``), as strict JSON."""
        write_atomic(str(path), strict_json.dumps(self.to_json(), indent=1))

def _get(d: dict, key: str, kind: type | tuple, where: str) -> Any:
    v = d.get(key) if isinstance(d, dict) else None
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise PlanError(f"{where}.{key}: missing or not a {getattr(kind, '__name__', kind)}")
    return v


def load_plan(path: str | Path) -> Plan:
    """Read a plan saved by ``Plan.save``; a malformed file is one line naming file and key."""
    p = str(path)
    try:
        with open_regular(p) as f:
            d = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise PlanError(f"{p}: cannot read: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PlanError(f"{p}: not valid JSON: {e}") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise PlanError(f"{p}: format: expected {FORMAT!r}")
    pieces = []
    for i, q in enumerate(_get(d, "pieces", list, p)):
        w = f"{p}: pieces[{i}]"
        pieces.append(Piece(*(_get(q, k, int, w) for k in ("table", "bag_start", "bag_stop",
                                                            "core")),
                            _get(q, "strategy", str, w), _get(q, "hot", int, w)))
    res = _get(d, "resident", dict, p)
    try:
        resident = {int(k): [int(r) for r in v] for k, v in res.items()}
    except (TypeError, ValueError):
        raise PlanError(f"{p}: resident: expected table -> list of row ids") from None
    tables = _get(d, "tables", list, p)
    for i, t in enumerate(tables):
        for k, kind in (("name", str), ("rows", int), ("dim", int), ("bags", int)):
            _get(t, k, kind, f"{p}: tables[{i}]")
    return Plan(_get(d, "policy", str, p), _get(d, "target", str, p), _get(d, "cores", int, p),
                _get(d, "preload", str, p), tables, pieces, resident,
                [float(x) for x in d.get("predicted_cycles", [])],
                float(d.get("mapper_seconds", 0.0)))
