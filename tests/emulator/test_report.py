"""The per-cluster report: JSON fields, totals over emulated clusters only, a refused cluster
reported (never silently dropped), and a table with one row per cluster."""

import json

import numpy as np

from ember_xla.emulator.report import ClusterResult, EmulationReport
from ember_xla.emulator.synthetic import embedding_bag_trace
from ember_xla.emulator.timing import simulate
from ember_xla.machines.config import load_target

TMU = load_target("tmu")


def timing(rows, seed):
    rng = np.random.default_rng(seed)
    offsets = np.arange(0, 8 * 5 + 1, 5)
    return simulate(TMU, embedding_bag_trace(rows, 32, rng.integers(0, rows, 40), offsets))


def test_json_and_table():
    a, b = timing(64, 0), timing(1_000_000, 1)
    rep = EmulationReport(TMU, "O3", [
        ClusterResult(0, "cc.1", "ember.offsets_bag", a),
        ClusterResult(1, "cc.2", "ember.segment_reduce", None, refused="weighted max"),
        ClusterResult(2, "cc.3", "ember.offsets_bag", b)], source="m.hlo", engine="Python")
    d = json.loads(rep.to_json())
    assert d["total_cycles"] == a.cycles + b.cycles and len(d["clusters"]) == 3
    c0, c1 = d["clusters"][0], d["clusters"][1]
    assert c0["emulated"] and c0["cycles"] == a.cycles and c0["bound"] == a.bound
    assert c0["seconds"] == a.cycles / 2e9
    assert 0 < c0["execute_utilization"] <= 1 and 0 < c0["access_utilization"] <= 1
    assert set(c0["cache_hit_rate"]) == {"L1D", "L2", "LLC"}
    assert c0["queue_full_stall_cycles"] == a.queue_full_stall
    assert c0["dram_bytes"] == a.dram_bytes and c0["bytes_loaded"] == a.bytes_loaded
    assert c1 == {"index": 1, "custom_call": "cc.2", "kind": "ember.segment_reduce",
                  "pass": "forward", "emulated": False, "refused": "weighted max"}
    text = rep.table()
    lines = text.splitlines()
    assert "-O3 on tmu" in lines[0]
    assert any("%cc.1" in ln and f"{a.cycles:,.0f}" in ln for ln in lines)
    assert any("total" in ln and f"{a.cycles + b.cycles:,.0f}" in ln for ln in lines)
    assert "cluster 1 (%cc.2) ran on the native kernel, not emulated: weighted max" in text
