"""The multi-core timing core (``emulator/cores.py``, ``cc/timing.cc``: SimulateCores): one core
is exactly the single-core timing, the shared levels and DRAM are contended for and shared, the
DRAM bank model is the same in the Python reference and the C++ core."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.program import emit_program
from ember_xla.emulator.cores import OnCore, run_kept, simulate_cores
from ember_xla.emulator.executor_cc import emulate_program, run_program_fast
from ember_xla.emulator.timing import simulate
from ember_xla.emulator.timing_cc import simulate_fast
from ember_xla.machines.config import load_target

TMU, TMU8 = load_target("tmu"), load_target("tmu8")
PROGRAM = emit_program(sum_bag_dlc(vl=8))


def _examples():
    return load_helper("dae_target/slc_examples.py")


def _bag(seed: int, bags: int = 64, pool: int = 12, rows: int = 200_000, dim: int = 64):
    rng = np.random.default_rng(seed)
    inputs = _examples().bag_inputs(rng, [pool] * bags, rows, dim)
    return inputs, [(bags, dim)]


@pytest.mark.parametrize("target", [TMU, TMU8], ids=["tmu", "tmu8"])
def test_one_core_is_exactly_the_single_core_timing(target):
    inputs, shape = _bag(1)
    _, alone = emulate_program(PROGRAM, inputs, target, shape)
    run = run_kept(PROGRAM, inputs, shape)
    (on_one,) = simulate_cores(target, [OnCore(run, 0, 0)], cores=1).cores
    assert on_one == alone
    assert alone.cycles > 0


def test_runs_on_one_core_run_one_after_the_other():
    a, b = _bag(2), _bag(3, bags=30)
    runs = [run_kept(PROGRAM, *a), run_kept(PROGRAM, *b)]
    timed = simulate_cores(TMU, [OnCore(r, 0, k) for k, r in enumerate(runs)], cores=1)
    (both,) = timed.cores
    alone = [emulate_program(PROGRAM, x[0], TMU, x[1])[1] for x in (a, b)]
    assert both.tokens == sum(r.tokens for r in alone)
    assert both.cycles > max(r.cycles for r in alone)
    assert 0 < timed.ends[0] < timed.ends[1] == both.cycles


def test_cores_contend_for_dram_bandwidth():
    """The same DRAM-heavy program on 8 cores (own tables): each core is slower than alone,
    and the DRAM lines add up."""
    narrow = dc.replace(TMU8, dram=dc.replace(TMU8.dram, bandwidth_gb_per_s=4.0))
    inputs, shape = _bag(4)
    _, alone = emulate_program(PROGRAM, inputs, narrow, shape)
    runs = [run_kept(PROGRAM, inputs, shape) for _ in range(8)]
    reps = simulate_cores(narrow, [OnCore(r, k, k) for k, r in enumerate(runs)]).cores
    assert len(reps) == 8
    assert sum(r.dram_bytes for r in reps) == 8 * alone.dram_bytes
    assert min(r.cycles for r in reps) > 2 * alone.cycles


def test_one_cluster_on_two_cores_shares_the_llc():
    """Two cores reading the same table (one region) fetch each line from DRAM once."""
    inputs, shape = _bag(5, rows=20_000)
    _, alone = emulate_program(PROGRAM, inputs, TMU8, shape)
    runs = [run_kept(PROGRAM, inputs, shape) for _ in range(2)]
    same = simulate_cores(TMU8, [OnCore(r, k, 0) for k, r in enumerate(runs)], cores=2).cores
    apart = simulate_cores(TMU8, [OnCore(r, k, k) for k, r in enumerate(runs)], cores=2).cores
    assert sum(r.dram_bytes for r in apart) == 2 * alone.dram_bytes
    assert sum(r.dram_bytes for r in same) < 1.2 * alone.dram_bytes


def test_bank_model_python_reference_equals_the_cpp_core():
    inputs, shape = _bag(6, bags=24, rows=50_000)
    _, trace = run_program_fast(PROGRAM, inputs, shape)
    assert simulate(TMU8, trace) == simulate_fast(TMU8, trace)
    assert TMU8.dram.banks is not None and TMU.dram.banks is None


def test_row_hits_are_faster_than_row_misses():
    """Reading a table's rows in order (row-buffer hits) beats reading them scattered."""
    rng = np.random.default_rng(7)
    rows, dim, n = 100_000, 16, 4096
    table = rng.standard_normal((rows, dim)).astype(np.float32)
    off = np.arange(0, n + 1, 8, dtype=np.int64)
    seq = np.arange(n, dtype=np.int32)
    scattered = rng.permutation(rows)[:n].astype(np.int32)
    t = [emulate_program(PROGRAM, [off, ids, table], TMU8, [(n // 8, dim)])[1].cycles
         for ids in (seq, scattered)]
    assert t[0] < t[1]


def test_bad_placements_are_one_line_errors():
    inputs, shape = _bag(8, bags=4)
    run = run_kept(PROGRAM, inputs, shape)
    with pytest.raises(ValueError, match="core 3 is not one of the 2 cores"):
        simulate_cores(TMU8, [OnCore(run, 3, 0)], cores=2)
    run.close()
    with pytest.raises(ValueError, match="closed"):
        simulate_cores(TMU8, [OnCore(run, 0, 0)], cores=2)
