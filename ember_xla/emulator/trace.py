"""The access/execute trace a DAE program run produces, in program order — the input of the
timing model (``timing.py``).

The functional run (an interpreter of the DLC level, or a synthetic generator in tests)
records what the access unit does: memory loads (address, bytes, and the earlier load whose
data its address needs: an index load feeding a row load), data-queue entries (each made of
the loads recorded since the previous entry, ``bytes`` long) and control tokens (a callback id;
the execute unit runs that case, popping ``pops`` data entries). For each case id the execute
unit's work is its vector-op counts per op class. Everything is stored in flat lists so a
trace of a DLRM-sized batch stays small."""

from __future__ import annotations

import dataclasses

LOAD, PUSH, TOKEN = 0, 1, 2


@dataclasses.dataclass
class CaseCost:
    """What one callback (a compute-loop case) does per firing."""

    ops: dict[str, float]  # vector/scalar op counts by op class (target.OP_CLASSES); a DAE
    #                        program's trace gives the mean per firing (exact totals)
    pops: int             # data-queue entries it pops


@dataclasses.dataclass
class Trace:
    kind: list[int] = dataclasses.field(default_factory=list)
    a: list[int] = dataclasses.field(default_factory=list)   # LOAD: address; PUSH: bytes; TOKEN: id
    b: list[int] = dataclasses.field(default_factory=list)   # LOAD: bytes
    c: list[int] = dataclasses.field(default_factory=list)   # LOAD: event index of dep or -1
    layer: list[int] = dataclasses.field(default_factory=list)  # LOAD: access layer
    queued: list[bool] = dataclasses.field(default_factory=list)  # LOAD: data goes to queue
    cases: dict[int, CaseCost] = dataclasses.field(default_factory=dict)

    def load(self, address: int, nbytes: int, dep: int = -1, queued: bool = True,
             layer: int | None = None) -> int:
        """Record a load; returns its event index (to name it as a later load's ``dep``).
        ``queued``: its data goes into the next data-queue entry (else it only feeds address
        generation, like an index or offsets stream). ``layer``: the traversal layer that
        issues it (loads of one layer issue in order; layers run ahead of each other);
        default 0 for address-only streams, 1 for queued data."""
        if dep >= len(self.kind) or (dep >= 0 and self.kind[dep] != LOAD):
            raise ValueError(f"dep {dep} is not an earlier load")
        self._add(LOAD, address, nbytes, dep)
        self.layer[-1] = (1 if queued else 0) if layer is None else layer
        self.queued[-1] = queued
        return len(self.kind) - 1

    def _add(self, kind: int, a: int, b: int = 0, c: int = -1) -> None:
        self.kind.append(kind)
        self.a.append(a)
        self.b.append(b)
        self.c.append(c)
        self.layer.append(-1)
        self.queued.append(False)

    def push(self, nbytes: int) -> None:
        """A data-queue entry made of the queued loads since the previous push."""
        self._add(PUSH, nbytes)

    def token(self, case_id: int) -> None:
        if case_id not in self.cases:
            raise ValueError(f"control token {case_id} has no case cost (call define_case)")
        self._add(TOKEN, case_id)

    def define_case(self, case_id: int, ops: dict[str, float], pops: int) -> None:
        self.cases[case_id] = CaseCost(dict(ops), pops)

    def __len__(self) -> int:
        return len(self.kind)

    def counts(self) -> dict[str, int]:
        return {"loads": self.kind.count(LOAD), "pushes": self.kind.count(PUSH),
                "tokens": self.kind.count(TOKEN),
                "bytes_loaded": sum(b for k, b in zip(self.kind, self.b, strict=True)
                                    if k == LOAD)}
