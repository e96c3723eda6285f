"""The Python reference emulator of DAE programs (``emulator/reference.py``): for clusters of
every kind, index mode, id and table dtype at -O0..-O4, ``run_program`` gives the DLC
interpreter's outputs bit for bit on random inputs and every edge case (empty bags, out-of-range,
negative and duplicate ids), the native kernel's outputs on XLA:CPU at -O0 and -O3, and a trace
whose counts are the interpreter's counters; the hand-written and the -O3 compiled bag give the
same trace counts. ~35 s (lowering and one XLA compile per case dominate)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.dae import from_text, to_text
from ember_xla.dae_target.check import EDGE_CASES, check_spec, random_inputs, summary
from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.interp.dlc import counts
from ember_xla.dae_target.interp.run import run_counted
from ember_xla.dae_target.program import emit_program
from ember_xla.emulator.reference import emulate, run_program
from ember_xla.emulator.timing import TimingReport
from ember_xla.emulator.trace import LOAD, PUSH, TOKEN
from ember_xla.machines.config import load_target

dae_cases = load_helper("emulator/dae_cases.py")
CASES, dlc, slc_examples = dae_cases.CASES, dae_cases.dlc, dae_cases.slc_examples


def trace_counts(program, trace, inputs) -> dict[str, int]:
    """The trace in the DLC interpreter's terms (``unique``'s id loads set apart)."""
    case_of = {n: cid for cb in program.callback_numbers() for cid, n in cb.items()}
    ids_bytes = sum(inputs[ins.src[0]].nbytes for ins in program.code if ins.op == "unique")
    kinds = np.asarray(trace.kind)
    out = {"dlc.tokens": int((kinds == TOKEN).sum()),
           "dlc.queue_entries": int((kinds == PUSH).sum()),
           "dlc.queue_bytes": int(np.asarray(trace.a)[kinds == PUSH].sum()),
           "stream_bytes": int(np.asarray(trace.b)[kinds == LOAD].sum()) - ids_bytes}
    tok = collections.Counter(case_of[a] for k, a in zip(trace.kind, trace.a, strict=True)
                              if k == TOKEN)
    out.update({f"dlc.callbacks.{c}": n for c, n in tok.items()})
    return out


def want_counts(c: dict[str, int]) -> dict[str, int]:
    keep = ("dlc.tokens", "dlc.queue_entries", "dlc.queue_bytes", "stream_bytes")
    return {k: v for k, v in counts(c).items() if k in keep or k.startswith("dlc.callbacks.")
            and v}


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        (a.view(np.uint8) == b.view(np.uint8)).all()
        or np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True))


@pytest.mark.parametrize("level", range(5))
@pytest.mark.parametrize("case", CASES)
def test_equals_the_dlc_interpreter(case, level):
    module, spec = dlc(case, level)
    program = emit_program(module, [a.shape for a in spec.operands])
    assert from_text(to_text(program)) == program
    rng = np.random.default_rng(level)
    for edge in [None, *EDGE_CASES]:
        inputs = random_inputs(spec, rng, edge)
        want, c = run_counted(module, inputs)
        got, trace = run_program(program, inputs)
        for w, g in zip(want, got, strict=True):
            assert same(w, g), f"{edge}: outputs differ\n{w}\n{g}"
        assert trace_counts(program, trace, inputs) == want_counts(c), edge


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("case", CASES)
def test_equals_the_kernel_on_xla(case, level):
    module, spec = dlc(case, level)
    program = emit_program(module)
    res = check_spec(spec, module, rounds=1, seed=level,
                     runner=lambda _m, xs: run_program(program, xs)[0])
    assert res.ok, summary(res)


def test_trace_addresses_and_dependencies():
    """Loads carry the element's address in its own buffer and the load their address needs."""
    off = np.array([0, 2, 3], np.int64)
    ids = np.array([4, 1, 4], np.int32)
    table = np.arange(40, dtype=np.float32).reshape(5, 8)
    program = emit_program(sum_bag_dlc(vl=8), output_shapes=[(2, 8)])
    (out,), tr = run_program(program, [off, ids, table])
    np.testing.assert_array_equal(out, slc_examples.bag_reference([off, ids, table]))
    loads = [i for i, k in enumerate(tr.kind) if k == LOAD]
    rows = [i for i in loads if tr.b[i] == 32]
    assert len(rows) == 3 and all(tr.queued[i] and tr.layer[i] == 2 for i in rows)
    table_base = tr.a[rows[0]] - 4 * 32
    assert [tr.a[i] - table_base for i in rows] == [4 * 32, 1 * 32, 4 * 32]
    assert table_base % 4096 == 0 and len({tr.a[i] // 4096 for i in loads}) == 3
    for i in rows:  # a row load waits for the id load that names its row
        dep = tr.c[i]
        assert tr.kind[dep] == LOAD and tr.b[dep] == 4 and tr.layer[dep] == 1
        assert not tr.queued[dep]
    # the whole-program order: begin-of-bag token, then per lookup its row entry and token
    seq = [("T", tr.a[i]) if k == TOKEN else ("P", tr.a[i]) for i, k in enumerate(tr.kind)
           if k != LOAD]
    assert seq == [("T", 0), ("P", 32), ("T", 1), ("P", 32), ("T", 1), ("T", 2),
                   ("T", 0), ("P", 32), ("T", 1), ("T", 2)]


def test_handwritten_and_compiled_o3_give_the_same_trace_counts():
    rng = np.random.default_rng(3)
    m = slc_examples.embedding_bag()
    from ember_xla.dae_target.passes.levels import run_stages

    compiled = run_stages(m, 3)[-1][1]
    for lengths, rows, dim in (([3, 0, 5, 1], 20, 13), ([0, 0], 4, 8), ([9], 3, 16)):
        inputs = slc_examples.bag_inputs(rng, lengths, rows, dim)
        shape = [(len(lengths), dim)]
        got, t_c = run_program(emit_program(compiled, output_shapes=shape), inputs, shape)
        want, t_h = run_program(emit_program(sum_bag_dlc(vl=8)), inputs, shape)
        np.testing.assert_array_equal(got[0], want[0])
        assert t_c.counts() == t_h.counts()
        assert t_c.counts()["tokens"] == 2 * len(lengths) + sum(lengths)
        # every callback costs what the hand-written one costs: the row zeroed in masked
        # vector chunks (vectorize's fill loop), the row added chunk by chunk
        assert t_c.cases == t_h.cases
        chunks = -(-dim // 8)
        assert t_h.cases[0].ops == {"scalar": chunks, "compare": chunks, "store": chunks}


def test_emulate_reports_timing():
    program = emit_program(sum_bag_dlc(vl=4), output_shapes=[(3, 16)])
    rng = np.random.default_rng(0)
    inputs = slc_examples.bag_inputs(rng, [2, 5, 1], 30, 16)
    outs, rep = emulate(program, inputs, load_target("tiny"))
    np.testing.assert_array_equal(outs[0], slc_examples.bag_reference(inputs))
    assert isinstance(rep, TimingReport) and rep.cycles > 0
    assert rep.tokens == 2 * 3 + 8 and rep.entries == 8 and rep.bytes_loaded > 8 * 64


def test_timing_of_entries_without_loads():
    """Induction variables pushed as operands are entries without loads: the timing model
    queues them in order (it used to wait forever for their loads)."""
    from ember_xla.emulator.timing import simulate
    from ember_xla.emulator.trace import Trace

    tr = Trace()
    tr.define_case(0, {"add": 1}, pops=2)
    for _ in range(3):
        tr.push(8)                         # a row index: no load
        tr.load(4096, 4)                   # the element, queued into the next entry
        tr.push(4)
        tr.token(0)
    tgt = load_target("tiny")
    rep = simulate(tgt, tr)
    per_case = tgt.execute.callback_dispatch_cycles + tgt.execute.op_cycles["add"]
    assert rep.tokens == 3 and rep.entries == 6
    assert rep.execute_busy == 3 * per_case and rep.cycles > rep.execute_busy
    full = Trace()
    full.define_case(0, {}, pops=1)
    full.push(4 * tgt.access.data_queue_bytes * tgt.access.lanes)
    full.token(0)
    with pytest.raises(Exception, match="does not fit"):
        simulate(tgt, full)


@pytest.mark.parametrize("target", ["tmu", "tiny"])
def test_levels_get_faster_on_the_emulator(target):
    """-O0 (a callback per element, indices pushed) > -O1 (per vector) > -O2 (per row)."""
    from ember_xla.dae_target.passes.levels import run_stages

    tgt = load_target(target)
    vl = tgt.execute.vector_bits // 64  # the -O1 callbacks get index vectors (64-bit lanes)
    rng = np.random.default_rng(1)
    inputs = slc_examples.bag_inputs(rng, [6, 2, 9, 4], 50, 16)
    shape = [(4, 16)]
    cycles = []
    for pipeline in ("decouple", f"vectorize{{vl={vl}}},decouple",
                     f"vectorize{{vl={vl}}},bufferize,decouple"):
        m = run_stages(slc_examples.embedding_bag(), pipeline)[-1][1]
        outs, rep = emulate(emit_program(m, output_shapes=shape), inputs, tgt, shape)
        np.testing.assert_array_equal(outs[0], slc_examples.bag_reference(inputs))
        cycles.append(rep.cycles)
    assert cycles[0] > cycles[1] > cycles[2], cycles


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_many_random_inputs(case):
    """Exhaustive variant (-m slow): 20 random input sets per level, outputs and counts."""
    for level in range(5):
        module, spec = dlc(case, level)
        program = from_text(to_text(emit_program(module)))
        rng = np.random.default_rng(100 + level)
        for round_ in range(20):
            inputs = random_inputs(spec, rng, EDGE_CASES[round_ % 4] if round_ % 4 < 3 else None)
            want, c = run_counted(module, inputs)
            got, trace = run_program(program, inputs)
            assert all(same(w, g) for w, g in zip(want, got, strict=True)), (level, round_)
            assert trace_counts(program, trace, inputs) == want_counts(c), (level, round_)
