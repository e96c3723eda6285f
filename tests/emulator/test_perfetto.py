"""The Chrome/Perfetto trace of a timing run: recording does not change a cycle, and the JSON
has the structure ui.perfetto.dev needs: required keys, sane timestamps, slices of one thread
that do not overlap, matched async pairs, counters within [0, capacity]."""

import dataclasses as dc
import json
from collections import defaultdict

import numpy as np
import pytest

from ember_xla.emulator.perfetto import TracedRun, capacities, chrome_trace, write_trace
from ember_xla.emulator.recorder import EventRecorder
from ember_xla.emulator.synthetic import embedding_bag_trace
from ember_xla.emulator.timing import simulate
from ember_xla.machines.config import load_target

TMU = load_target("tmu")
# a queue that holds one 256-byte row: back-pressure on every row
SMALL_QUEUE = dc.replace(TMU, access=dc.replace(TMU.access, data_queue_bytes=32))


def bag_trace(rows=100_000, dim=64, batch=16, pooling=6, granularity="row"):
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, pooling, batch)            # empty bags included
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return embedding_bag_trace(rows, dim, rng.integers(0, rows, offsets[-1]), offsets,
                               granularity, vl=16)


def check_structure(data, runs):
    assert set(data) >= {"traceEvents", "displayTimeUnit", "otherData"}
    json.loads(json.dumps(data))                          # plain JSON
    evs = data["traceEvents"]
    last_ts = -1.0
    slices = defaultdict(list)
    open_async = {}
    counters = defaultdict(list)
    for e in evs:
        assert {"ph", "name", "pid"} <= set(e), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and "name" in e["args"]
            continue
        assert e["ts"] >= last_ts and e["ts"] >= 0        # sorted, non-negative
        last_ts = e["ts"]
        if e["ph"] == "X":
            assert e["dur"] >= 0 and "tid" in e
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif e["ph"] == "b":
            open_async[(e["pid"], e["id"])] = e["ts"]
        elif e["ph"] == "e":
            assert open_async.pop((e["pid"], e["id"])) <= e["ts"]
        elif e["ph"] == "C":
            (value,) = e["args"].values()
            counters[(e["pid"], e["name"])].append(value)
        else:
            raise AssertionError(f"unexpected phase {e['ph']}")
    assert not open_async, "an async load slice is never closed"
    eps = 1e-9
    for spans in slices.values():
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end - eps, "slices of one thread overlap"
    for (pid, name), values in counters.items():
        cap = data["otherData"]["capacity"][str(pid)][name]
        assert min(values) >= 0 and max(values) <= cap, (name, min(values), max(values), cap)
    return counters


@pytest.mark.parametrize("target", [TMU, SMALL_QUEUE], ids=["tmu", "one-row-queue"])
@pytest.mark.parametrize("granularity", ["element", "row"])
def test_recording_changes_no_cycle_and_trace_is_well_formed(target, granularity):
    tr = bag_trace(granularity=granularity)
    rec = EventRecorder()
    with_rec = simulate(target, tr, recorder=rec)
    assert with_rec == simulate(target, tr)
    assert len(rec.callbacks) == with_rec.tokens and len(rec.entries) == with_rec.entries
    assert sum(e - s for _, _, s, e in rec.callbacks) == pytest.approx(with_rec.execute_busy)
    data = chrome_trace([TracedRun("cluster 0", target, rec, with_rec.cycles)])
    counters = check_structure(data, None)
    dq = counters[(1, "data queue")]
    assert dq[-1] == 0 and counters[(1, "outstanding requests")][-1] == 0
    if target is SMALL_QUEUE and granularity == "row":   # back-pressure: the queue is full
        assert max(dq) == capacities(target)["data queue"]
        assert with_rec.queue_full_stall > 0
    ends = [e["ts"] + e.get("dur", 0) for e in data["traceEvents"] if e["ph"] != "M"]
    assert max(ends) * TMU.clock_ghz * 1e3 == pytest.approx(with_rec.cycles)


def test_two_clusters_follow_each_other_and_truncation_stays_valid(tmp_path):
    runs = []
    for label in ("cluster 0", "cluster 1"):
        rec = EventRecorder()
        r = simulate(TMU, bag_trace(), recorder=rec)
        runs.append(TracedRun(label, TMU, rec, r.cycles))
    data = chrome_trace(runs)
    check_structure(data, runs)
    first_of_2 = min(e["ts"] for e in data["traceEvents"] if e["pid"] == 2 and "ts" in e)
    assert first_of_2 * TMU.clock_ghz * 1e3 == pytest.approx(runs[0].cycles)
    small = chrome_trace(runs, max_events=300)
    check_structure(small, runs)
    assert "truncated_at_cycle" in small["otherData"] and len(small["traceEvents"]) < 320
    n = write_trace(str(tmp_path / "t.json"), runs)
    assert n == len(json.loads((tmp_path / "t.json").read_text())["traceEvents"])
