"""The timing model of one DAE core (Python reference): replays a ``Trace`` on a ``Target``.

Access unit: each traversal layer issues its loads in program order, layers run ahead of each
other; a load waits for address generation (``addresses_per_cycle`` x ``lanes`` cache-line
addresses per cycle), for the load its address depends on, for a free slot among
``outstanding_requests`` and — for the first load of a data-queue entry — for room for the
whole entry in the data queue (``data_queue_bytes`` x ``lanes``): back-pressure when full.
Requests are issued in global time order, so the memory system (``memory.py``: LRU caches,
DRAM latency + shared bandwidth) sees them in order. An entry is pushed when its last load
completes; a control token right after the data before it, when the control queue has room.
An entry with no queued load (an induction variable pushed as an operand) takes its room in
the queue, in order, at the issue time of the last load issued before it, and is pushed then.
Execute unit: pops tokens in order; a callback starts when the core is free, its token has
arrived and every entry it pops has arrived (else it starves: queue-empty stall), runs for
``callback_dispatch_cycles`` + its ops x ``op_cycles``, and frees its entries when it ends.
Every parameter comes from the target description; nothing is fitted."""

from __future__ import annotations

import collections
import dataclasses
import heapq
import math
from typing import Any

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.memory import Memory
from ember_xla.emulator.trace import LOAD, PUSH, TOKEN, Trace
from ember_xla.machines.config import Target

INF = math.inf


@dataclasses.dataclass
class TimingReport:
    cycles: float
    seconds: float
    access_busy: float
    execute_busy: float
    queue_full_stall: float
    queue_empty_stall: float
    bytes_loaded: int
    dram_bytes: int
    cache_hit_rate: dict[str, float]
    tokens: int
    entries: int
    bound: str

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["access_utilization"] = self.access_busy / self.cycles if self.cycles else 0.0
        d["execute_utilization"] = self.execute_busy / self.cycles if self.cycles else 0.0
        return d


def case_cycles(target: Target, trace: Trace) -> dict[int, float]:
    """Cycles of one firing of each case: dispatch + its ops x their issue cycles."""
    ex = target.execute
    return {cid: float(ex.callback_dispatch_cycles
                       + sum(n * ex.op_cycles[k] for k, n in c.ops.items()))
            for cid, c in trace.cases.items()}


def bound_of(cycles: float, execute: float, dram: float, access: float) -> str:
    """The unit busiest over the run, or "memory latency" when none is busy 70% of it."""
    if not cycles:
        return "none"
    util = {"execute": execute / cycles, "dram bandwidth": dram / cycles,
            "access": access / cycles}
    bound = max(util, key=util.get)
    return bound if util[bound] >= 0.7 else "memory latency"


class _Sim:
    def __init__(self, target: Target, trace: Trace, recorder: Any = None) -> None:
        self.rec = recorder
        self.t = target
        self.tr = trace
        self.mem = Memory(target)
        a = target.access
        self.agen_step = 1.0 / (a.addresses_per_cycle * a.lanes)
        self.queue_bytes = a.data_queue_bytes * a.lanes
        self.outstanding = a.outstanding_requests
        self.ctrl_cap = a.control_queue_entries
        self.case_cycles = case_cycles(target, trace)
        self._index()

    # -- structure of the trace --------------------------------------------------------------
    def _index(self) -> None:
        tr = self.tr
        self.layers: dict[int, collections.deque[int]] = collections.defaultdict(
            collections.deque)
        self.entry_of: dict[int, int] = {}       # queued load -> entry
        self.entry_loads: list[list[int]] = []
        self.entry_bytes: list[int] = []
        self.token_case: list[int] = []
        self.token_after: list[int] = []         # entries pushed before the token
        pending: list[int] = []
        for i, k in enumerate(tr.kind):
            if k == LOAD:
                self.layers[tr.layer[i]].append(i)
                if tr.queued[i]:
                    pending.append(i)
            elif k == PUSH:
                e = len(self.entry_loads)
                for i2 in pending:
                    self.entry_of[i2] = e
                self.entry_loads.append(pending)
                self.entry_bytes.append(tr.a[i])
                if tr.a[i] > self.queue_bytes:
                    raise ProgramDoesNotFit(
                        f"a data-queue entry of {tr.a[i]} bytes does not fit the "
                        f"{self.queue_bytes}-byte data queue ({self.t.access.lanes} lanes x "
                        f"{self.t.access.data_queue_bytes} B) of {self.t.name}")
                pending = []
            else:
                self.token_case.append(tr.a[i])
                self.token_after.append(len(self.entry_loads))
        n_e = len(self.entry_loads)
        self.done: dict[int, float] = {}
        self.push_time: list[float | None] = [None] * n_e
        self.pop_time: list[float | None] = [None] * n_e
        self.reserved = 0                       # entries reserved so far (in order)
        self.in_queue: collections.deque[int] = collections.deque()
        self.used = 0
        self.room_at = 0.0                      # when the queue space freed so far was freed
        self.n_tok = len(self.token_case)
        self.tok_time: list[float] = []
        self.tok_start: list[float] = []
        self.exec_free = 0.0
        self.data_ptr = 0
        self.queue_full = 0.0
        self.queue_empty = 0.0
        self.exec_busy = 0.0
        self.access_busy = 0.0

    # -- execute unit -----------------------------------------------------------------------
    def _entry_pushed(self, e: int) -> float | None:
        if self.push_time[e] is None and self.entry_loads[e]:
            loads = self.entry_loads[e]
            if any(i not in self.done for i in loads):
                return None
            self.push_time[e] = max((self.done[i] for i in loads), default=0.0)
        return self.push_time[e]

    def _exec_next(self) -> bool:
        """Run the next callback if its inputs are known; False when blocked or done."""
        k = len(self.tok_start)
        if k >= self.n_tok:
            return False
        before = self.token_after[k]
        t_tok = self.tok_time[-1] if self.tok_time else 0.0
        if before:
            p = self._entry_pushed(before - 1)
            if p is None:
                return False
            t_tok = max(t_tok, p)
        if k >= self.ctrl_cap:
            t_tok = max(t_tok, self.tok_start[k - self.ctrl_cap])
        case = self.token_case[k]
        pops = self.tr.cases[case].pops
        ready = t_tok
        for e in range(self.data_ptr, self.data_ptr + pops):
            if e >= len(self.entry_loads):
                raise ProgramDoesNotFit(f"callback {case} pops more data than was pushed")
            p = self._entry_pushed(e)
            if p is None:
                return False
            ready = max(ready, p)
        start = max(self.exec_free, ready)
        if ready > self.exec_free:
            self.queue_empty += ready - self.exec_free
        cost = self.case_cycles[case]
        self.exec_free = start + cost
        self.exec_busy += cost
        for e in range(self.data_ptr, self.data_ptr + pops):
            self.pop_time[e] = self.exec_free
            if self.rec is not None:
                self.rec.pop(e, self.exec_free)
        if self.rec is not None:
            self.rec.callback(case, t_tok, ready, start, self.exec_free)
        self.data_ptr += pops
        self.tok_time.append(t_tok)
        self.tok_start.append(start)
        return True

    def _popped(self, e: int) -> float | None:
        while self.pop_time[e] is None:
            if not self._exec_next():
                return None
        return self.pop_time[e]

    # -- access unit ------------------------------------------------------------------------
    def _reserve(self, e: int, t: float) -> float | None:
        """Earliest cycle >= t with room for entry e in the data queue (None: blocked).
        Entries leave the queue in order; ``room_at`` keeps the pop time of the last one that
        had to leave, so the wait survives a candidate that is not issued at once."""
        if e != self.reserved:
            return None  # entries are reserved in order
        need = self.entry_bytes[e]
        while self.used + need > self.queue_bytes:
            p = self._popped(self.in_queue[0])
            if p is None:
                return None
            self.room_at = max(self.room_at, p)
            self.used -= self.entry_bytes[self.in_queue.popleft()]
        return max(t, self.room_at)

    def _reserve_loadless(self) -> None:
        """Reserve (and push) the entries without loads that are next in order, if there is
        room (else they wait: for pops, or until the final drain)."""
        while self.reserved < len(self.entry_loads) and not self.entry_loads[self.reserved]:
            e = self.reserved
            room = self._reserve(e, self.last_issue)
            if room is None:
                return
            self.queue_full += room - self.last_issue
            self.in_queue.append(e)
            self.used += self.entry_bytes[e]
            self.reserved += 1
            self.push_time[e] = room
            if self.rec is not None:
                self.rec.reserve(e, room, self.entry_bytes[e])

    def _candidate(self, layer: int) -> float | None:
        i = self.layers[layer][0]
        t = self.agen[layer]
        dep = self.tr.c[i]
        if dep >= 0:
            if dep not in self.done:
                return None
            t = max(t, self.done[dep])
        return t

    def _issue(self, layer: int, t: float, waited: float) -> None:
        """Issue the next load of ``layer`` at ``t`` (``waited``: cycles it waited for room
        in the data queue)."""
        i = self.layers[layer].popleft()
        self.last_issue = max(self.last_issue, t)
        e = self.entry_of.get(i)
        if e is not None and e == self.reserved:
            self.queue_full += waited
            self.in_queue.append(e)
            self.used += self.entry_bytes[e]
            self.reserved += 1
            if self.rec is not None:
                self.rec.reserve(e, t, self.entry_bytes[e])
        lb = self.mem.line_bytes
        addr, n = self.tr.a[i], max(self.tr.b[i], 1)
        done = t
        t_issue = t
        for line in range(addr // lb, (addr + n - 1) // lb + 1):
            while self.heap and self.heap[0] <= t:
                heapq.heappop(self.heap)
            if len(self.heap) >= self.outstanding:
                t = max(t, heapq.heappop(self.heap))
            c = self.mem.access(line, t)
            heapq.heappush(self.heap, c)
            if self.rec is not None:
                self.rec.request(t, c)
            done = max(done, c)
            t += self.agen_step
            self.access_busy += self.agen_step
        self.done[i] = done
        self.agen[layer] = t
        if self.rec is not None:
            self.rec.load(layer, t_issue, t, done, addr, self.tr.b[i])

    def run(self) -> TimingReport:
        self.agen = {layer: 0.0 for layer in self.layers}
        self.heap: list[float] = []
        self.last_issue = 0.0
        while any(self.layers.values()):
            self._reserve_loadless()
            best, best_t, best_wait = None, INF, 0.0
            for layer, q in self.layers.items():
                if not q:
                    continue
                t = self._candidate(layer)
                if t is None:
                    continue
                wait = 0.0
                e = self.entry_of.get(q[0])
                if e is not None and e == self.reserved:
                    room = self._reserve(e, t)
                    if room is None:
                        continue
                    wait = max(0.0, room - t)
                    t += wait
                elif e is not None and e > self.reserved:
                    continue
                if t < best_t:
                    best, best_t, best_wait = layer, t, wait
            if best is None:
                raise ProgramDoesNotFit(
                    f"the access unit deadlocks on {self.t.name}: the data queue "
                    f"({self.queue_bytes} B) cannot hold the entries one callback needs "
                    "before its control token is pushed")
            self._issue(best, best_t, best_wait)
        while self.reserved < len(self.entry_loads):
            before = self.reserved
            self._reserve_loadless()
            if self.reserved == before:
                raise ProgramDoesNotFit(
                    f"the access unit deadlocks on {self.t.name}: the data queue "
                    f"({self.queue_bytes} B) cannot hold the entries one callback needs "
                    "before its control token is pushed")
        while self._exec_next():
            pass
        if len(self.tok_start) != self.n_tok:
            raise ProgramDoesNotFit("callbacks wait for data that is never pushed")
        end = max([self.exec_free, *self.done.values(), *self.tok_time, 0.0])
        return self._report(end)

    def _report(self, cycles: float) -> TimingReport:
        bound = bound_of(cycles, self.exec_busy, self.mem.dram_busy, self.access_busy)
        return TimingReport(
            cycles=cycles, seconds=cycles / (self.t.clock_ghz * 1e9),
            access_busy=self.access_busy, execute_busy=self.exec_busy,
            queue_full_stall=self.queue_full, queue_empty_stall=self.queue_empty,
            bytes_loaded=sum(b for k, b in zip(self.tr.kind, self.tr.b, strict=True)
                             if k == LOAD),
            dram_bytes=self.mem.dram_bytes,
            cache_hit_rate={s.name: s.hit_rate for s in self.mem.stats()},
            tokens=self.n_tok, entries=len(self.entry_loads), bound=bound)


def simulate(target: Target, trace: Trace, recorder: Any = None) -> TimingReport:
    """Cycles, stalls, traffic and the bounding unit of ``trace`` on ``target``.
    ``recorder`` (a ``recorder.EventRecorder``) receives every event as the model decides
    it; the cycles are the same with or without one."""
    if PUSH not in trace.kind and TOKEN not in trace.kind and LOAD not in trace.kind:
        return _Sim(target, trace)._report(0.0)
    return _Sim(target, trace, recorder).run()
