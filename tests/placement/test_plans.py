"""Plans: every policy's plan fits (property test over random workloads, cores and scratchpad
sizes: every bag once, L1 never over-full, the emulator accepts it) and yields outputs
bit-identical to a sequential numpy embedding bag; a plan that cannot fit is refused with the
reason; plans round-trip through JSON."""

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_cases import random_workload

from ember_xla.placement.api import emulate_plan, place
from ember_xla.placement.plan import Piece, PlanError, load_plan


def sequential(t, b):
    out = np.zeros((b.n_bags, t.dim), np.float32)
    for i in range(b.n_bags):
        for j in b.ids[b.offsets[i]:b.offsets[i + 1]]:
            out[i] += t.weights[j]
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n_tables=st.integers(1, 5), cores=st.integers(1, 4),
       l1_kib=st.sampled_from([1, 8, 64, 512]), preload=st.sampled_from(["model", "batch"]))
def test_every_plan_fits_and_pools_identically(npu, seed, n_tables, cores, l1_kib, preload):
    m = dataclasses.replace(npu, cores=cores, l1_bytes=l1_kib * 1024)
    tables, batches = random_workload(np.random.default_rng(seed), n_tables)
    ref = [sequential(t, b) for t, b in zip(tables, batches, strict=True)]
    for policy in ("symmetric", "greedy", "auto"):
        plan = place(tables, batches, m, policy, preload=preload)
        for c in range(plan.cores):
            assert plan.l1_used(c) <= m.l1_bytes
        outs, rep = emulate_plan(plan, tables, batches, m, preload)
        assert all(c.l1_bytes_used <= m.l1_bytes for c in rep.npu.cores)
        for o, r in zip(outs, ref, strict=True):
            assert np.array_equal(o, r)


@pytest.fixture(scope="module")
def small(npu):
    tables, batches = random_workload(np.random.default_rng(7), 4)
    return npu, tables, batches


def test_plan_json_round_trip(small, tmp_path):
    m, tables, batches = small
    plan = place(tables, batches, m, "auto")
    plan.save(tmp_path / "p.json")
    back = load_plan(tmp_path / "p.json")
    assert back.to_json() == plan.to_json()
    again = place(tables, batches, m, str(tmp_path / "p.json"))
    o1, r1 = emulate_plan(plan, tables, batches, m)
    o2, r2 = emulate_plan(again, tables, batches, m)
    assert r1.makespan_cycles == r2.makespan_cycles
    assert all(np.array_equal(a, b) for a, b in zip(o1, o2, strict=True))
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]     # no temporary left over


def _saved(plan, tmp_path, edit):
    d = plan.to_json()
    edit(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    return str(p)


@pytest.mark.parametrize("edit,reason", [
    (lambda d: d["pieces"].append(dict(d["pieces"][0])), r"bag \d+ is assigned 2 times"),
    (lambda d: d["pieces"].pop(), r"is assigned 0 times"),
    (lambda d: d["pieces"][0].update(strategy="fast"), r"strategy 'fast': expected one of"),
    (lambda d: d["pieces"][0].update(core=9), r"core 9 outside \[0, 8\)"),
    (lambda d: d["tables"][0].update(rows=5), r"table 0: plan was made for"),
    (lambda d: d.update(format="x"), r"format: expected"),
    (lambda d: d["pieces"][0].pop("hot"), r"pieces\[0\]\.hot: missing"),
])
def test_bad_plan_files_are_refused_with_the_reason(small, tmp_path, edit, reason):
    m, tables, batches = small
    plan = place(tables, batches, m, "symmetric")
    with pytest.raises(PlanError, match=reason) as e:
        place(tables, batches, m, _saved(plan, tmp_path, edit))
    assert "\n" not in str(e.value)


def test_a_plan_that_does_not_fit_the_scratchpad_is_refused(npu, tmp_path):
    tables, batches = random_workload(np.random.default_rng(3), 2)
    plan = place(tables, batches, npu, "symmetric")
    t = max(range(2), key=lambda i: tables[i].rows * tables[i].row_bytes)
    rows = tables[t].rows
    plan.pieces = [Piece(p.table, p.bag_start, p.bag_stop, p.core, "l1_ub" if p.table == t
                         else p.strategy, rows if p.table == t else 0) for p in plan.pieces]
    plan.resident = {t: list(range(rows))}
    small = dataclasses.replace(npu, l1_bytes=rows * tables[t].row_bytes - 1)
    path = tmp_path / "p.json"
    plan.save(path)
    with pytest.raises(PlanError, match=r"core \d: L1-resident rows need \d+ bytes; the "
                       r"scratchpad holds \d+ bytes"):
        place(tables, batches, small, str(path))
