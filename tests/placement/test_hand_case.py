"""Symmetric, greedy and ours on a case small enough to time by hand, on a 2-core target with
round numbers (latency 50 cycles, 64-byte rows moved in 1 cycle, setup 100 cycles, no room
in L1): two tables, each two bags of one lookup.

One row-at-a-time (gm) piece of one one-lookup bag, alone on a core: setup to 100; index
staging 100 -> 151 (1 + 50); zero the accumulator 152; fetch the row 152 -> 203; add 204;
store 205; write the row back 205 -> 256. A second such piece on the core starts its setup
when the vector unit is free (205 -> 305), its staging waits behind nothing (the first
write went at 205): 305 -> 356, zero 357, fetch 357 -> 408, add 409, store 410, write
410 -> 461. Symmetric gives each core one bag of each table: 461.
One staged (gm_ub) piece of a whole table (two bags, rows 1 and 2): staging 100 -> 151;
indices read at 152 and 154, rows fetched 152 -> 203 and 154 -> 205; gather + add 2 x 2
cycles: 209; per bag zero + store: 213; the two output rows written 213 -> 265. Greedy (no
table fits L1: staged) puts one table on each core: 265.
Ours also puts one table on each core, but row at a time (its cost model prices that lower
here, rightly): staging 100 -> 151; bag 0: zero 152, fetch 152 -> 203, add 204, store 205;
bag 1 (the second row buffer is free): zero 206, index at 154, fetch 154 -> 205, add 207,
store 208; the two output rows written 208 -> 260."""

import tomllib

import numpy as np
import pytest

from ember_xla.emulator.npu.workload import Table, bags
from ember_xla.machines.config import builtin_configs, parse_target
from ember_xla.placement.api import emulate_plan, machine, place


@pytest.fixture(scope="module")
def hand():
    d = tomllib.loads((builtin_configs() / "npu.toml").read_text())
    d["target"].update(cores=2, clock_ghz=1.0)
    d["dram"].update(bandwidth_gb_per_s=6400.0)
    d["dma"].update(latency_ns=50.0, bandwidth_gb_per_s=64.0, outstanding=4, issue_cycles=1,
                    granule_bytes=64, index_cycles=1, piece_setup_cycles=100)
    d["unified_buffer"]["size_bytes"] = 4096
    d["scratchpad"].update(size_bytes=32, latency_cycles=1, bytes_per_cycle=64)
    m = machine(parse_target(d, "hand.toml"))
    tables = [Table(f"t{i}", 64, 16, seed=i) for i in range(2)]
    batches = [bags(np.array([1, 2]), np.array([0, 1, 2])) for _ in range(2)]
    return m, tables, batches


@pytest.mark.parametrize("policy,cycles", [("symmetric", 461), ("greedy", 265),
                                           ("auto", 260)])
def test_makespans_computed_by_hand(hand, policy, cycles):
    m, tables, batches = hand
    plan = place(tables, batches, m, policy)
    assert sorted(p.core for p in plan.pieces) == ([0, 0, 1, 1] if policy == "symmetric"
                                                   else [0, 1])
    outs, rep = emulate_plan(plan, tables, batches, m)
    # both cores move their transfers at the same instants: the shared memory serialises
    # each 64-byte transfer for 0.01 cycle
    assert rep.makespan_cycles == pytest.approx(cycles, abs=0.1)
    assert all(c.emulated_cycles == pytest.approx(cycles, abs=0.1) for c in rep.cores)
    ref = tables[0].rows_of(np.array([1, 2]))
    assert np.array_equal(outs[0], ref) and np.array_equal(outs[1], tables[1].rows_of(
        np.array([1, 2])))
