"""The C++ executor of DAE programs (``cc/machine*.cc``, ``access.cc``, ``emulate.cc``)
from Python: run a program on numpy arrays with the reference semantics and time it on a
target, all in C++ (``emulate_program``), or get its trace back for cross-checks
(``run_program_fast``); the attributes of an ``ember.emulate`` custom-call and the report log
its FFI handler fills (``emulate_attributes``, ``take_reports``).

Two modes of the executor (``cc/machine.h``): ``full`` computes every value; ``addresses``
computes only what decides addresses, bounds, branches and checks (never the table rows, the
outputs or scratch buffers), which gives the same trace and case op counts, hence the same
timing, without the arithmetic: ``time_program`` (no outputs; the bit-exact native kernel gives
them). A program whose addresses or control flow depend on computed data raises
``AddressesUnsupported``: it needs the full mode."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.emulator.cc_library import CPtr, ResultStruct, load, report_of, target_struct
from ember_xla.emulator.memory import LevelStats
from ember_xla.emulator.timing import TimingReport, bound_of
from ember_xla.emulator.trace import CaseCost, Trace
from ember_xla.machines.config import Target


def target_text(target: Target) -> str:
    """The compact one-line form of ``target`` the C++ emulator reads (cc/target_text.h):
    the timing parameters as ``timing.py`` derives them (floats as repr, so both cores see the
    same doubles), the dispatch and op cycles, the cache levels."""
    from ember_xla.machines.config import OP_CLASSES

    tg, (sets, ways, lat) = target_struct(target)
    ex = target.execute
    fields = ["ember-target", "1", _word(target.name), repr(float(target.clock_ghz)),
              repr(tg.agen_step), repr(tg.dram_latency),
              repr(tg.transfer), str(tg.queue_bytes), str(tg.outstanding), str(tg.ctrl_cap),
              str(tg.line_bytes), str(ex.callback_dispatch_cycles),
              *(str(ex.op_cycles[c]) for c in OP_CLASSES), str(len(sets))]
    for c, s, w, la in zip(target.caches, sets, ways, lat, strict=True):
        fields += [_word(c.name), str(int(s)), str(int(w)), str(int(la))]
    if tg.dram_banks:
        fields += ["dram", str(tg.dram_channels), str(tg.dram_banks), str(tg.dram_row_lines),
                   repr(tg.dram_row_hit), repr(tg.dram_row_miss)]
    return " ".join(fields)


def _word(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in name) or "-"


def _program_text(program: Any) -> str:
    if isinstance(program, str):
        return program
    from ember_xla.dae import to_text

    return to_text(program, one_line=True)


MODES = ("full", "addresses")


class AddressesUnsupported(ValueError):
    """The addresses mode cannot run a program: computed data would decide an address, a
    bound, a branch or an index (the message says which)."""


def _run(program: Any, inputs: Sequence[Any], output_shapes: Sequence[Sequence[int]] | None,
         mode: str = "full") -> tuple[int, list[np.ndarray], Any]:
    """Run the program in C++; (handle, outputs). The caller frees the handle. In the
    ``addresses`` mode no output is allocated (outputs is empty)."""
    from ember_xla.dae import from_text
    from ember_xla.dae.model import scalar_type
    from ember_xla.ir.interpreter import InterpretError
    from ember_xla.ir.types import numpy_dtype

    text = _program_text(program)
    p = from_text(text) if isinstance(program, str) else program
    if len(inputs) != p.num_inputs:
        raise InterpretError(f"{p.name} takes {p.num_inputs} inputs, got {len(inputs)}")
    outs_spec = [a for a in p.args if a.role == "out"]
    if output_shapes is not None and len(output_shapes) != len(outs_spec):
        raise InterpretError(f"{p.name}: {len(output_shapes)} output shapes for "
                             f"{len(outs_spec)} outputs")
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    held: list[np.ndarray] = []  # the buffers C++ reads or writes, alive until the call returns
    ptrs_list: list[int | None] = []  # None: an output the addresses mode never touches
    shapes: list[tuple[int, ...]] = []
    sizes: list[int] = []
    outputs: list[np.ndarray] = []
    for k, a in enumerate(p.args):
        dt = numpy_dtype(scalar_type(a.dtype))
        if a.role == "in":
            x = np.asarray(inputs[k])
            if x.dtype != dt or x.ndim != len(a.shape):
                raise InterpretError(f"input {k} ({a.name}): got {x.dtype}{list(x.shape)}, the "
                                     f"program wants {a.dtype}{list(a.shape)}")
            buf = np.asarray(x, order="C")  # (ascontiguousarray would make 0-d 1-d)
        else:
            shape = tuple(output_shapes[k - p.num_inputs]) if output_shapes is not None \
                else a.shape
            if len(shape) != len(a.shape) or any(d < 0 for d in shape):
                raise InterpretError(f"output {a.name}: shape {list(shape)} unknown or of the "
                                     "wrong rank (pass output_shapes)")
            if mode == "addresses":  # never written: only its shape and size matter
                ptrs_list.append(None)
                shapes.append(shape)
                sizes.append(int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize)
                continue
            buf = np.empty(shape, dtype=dt)
            outputs.append(buf)
        held.append(buf)
        ptrs_list.append(buf.ctypes.data)
        shapes.append(buf.shape)
        sizes.append(buf.nbytes)
    lib = load()
    ranks = np.array([len(sh) for sh in shapes], np.int64)
    dims = np.array([d for sh in shapes for d in sh] or [0], np.int64)
    ptrs = (ctypes.c_void_p * len(ptrs_list))(*ptrs_list)
    nbytes = np.array(sizes, np.int64)
    err = ctypes.create_string_buffer(1024)
    h = lib.ember_run_program_mode(text.encode(), ctypes.c_int64(mode == "addresses"),
                                   ctypes.c_int64(len(ptrs_list)), CPtr(ranks.ctypes.data),
                                   CPtr(dims.ctypes.data), ptrs, CPtr(nbytes.ctypes.data), err,
                                   ctypes.c_int64(len(err)))
    if not h:
        msg = err.value.decode()
        if msg.startswith("addresses: "):
            raise AddressesUnsupported(f"{p.name}: the addresses mode cannot run it: "
                                       f"{msg.removeprefix('addresses: ')}")
        if msg.startswith("program: "):
            from ember_xla.dae import ProgramError

            raise ProgramError(msg.removeprefix("program: "))
        raise InterpretError(msg)
    return h, outputs, lib


def _cases(lib: ctypes.CDLL, h: int) -> dict[int, CaseCost]:
    from ember_xla.machines.config import OP_CLASSES

    out = {}
    for k in range(lib.ember_run_n_cases(CPtr(h))):
        pops, fired, n_order = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        order = np.zeros(9, np.int64)
        totals = np.zeros(9, np.float64)
        lib.ember_run_case(CPtr(h), ctypes.c_int64(k), ctypes.byref(pops), ctypes.byref(fired),
                           ctypes.byref(n_order), CPtr(order.ctypes.data),
                           CPtr(totals.ctypes.data))
        ops: dict[str, int | float] = {}
        for c in order[:n_order.value]:
            mean = int(totals[c]) / fired.value
            ops[OP_CLASSES[c]] = int(mean) if mean == int(mean) else mean
        out[k] = CaseCost(ops, pops.value)
    return out


def run_program_fast(program: Any, inputs: Sequence[Any],
                     output_shapes: Sequence[Sequence[int]] | None = None, mode: str = "full"
                     ) -> tuple[list[np.ndarray], Trace]:
    """``reference.run_program`` in C++: the same outputs and trace (for cross-checks; the
    trace is copied into a Python ``Trace``). ``mode="addresses"``: no outputs (empty list),
    the same trace."""
    h, outputs, lib = _run(program, inputs, output_shapes, mode)
    try:
        n = lib.ember_run_trace_size(CPtr(h))
        kind = np.zeros(n, np.int8)
        cols = [np.zeros(n, np.int64) for _ in range(4)]
        queued = np.zeros(n, np.uint8)
        lib.ember_run_trace_copy(CPtr(h), CPtr(kind.ctypes.data),
                                 *(CPtr(c.ctypes.data) for c in cols), CPtr(queued.ctypes.data))
        tr = Trace(kind.tolist(), *(c.tolist() for c in cols), [bool(q) for q in queued],
                   _cases(lib, h))
    finally:
        lib.ember_run_free(CPtr(h))
    return outputs, tr


def emulate_program(program: Any, inputs: Sequence[Any], target: Target,
                    output_shapes: Sequence[Sequence[int]] | None = None
                    ) -> tuple[list[np.ndarray], TimingReport]:
    """Run ``program`` (a ``DaeProgram`` or its text) on ``inputs`` and time it on ``target``,
    all in C++ (the trace never reaches Python): (outputs, TimingReport), equal to
    ``reference.emulate``'s. ``ProgramDoesNotFit`` when the program does not fit the target:
    the binder's static checks first (``bind_program``), then the timing core's."""
    return _simulate(program, inputs, target, output_shapes, "full")


def _simulate(program: Any, inputs: Sequence[Any], target: Target,
              output_shapes: Sequence[Sequence[int]] | None, mode: str
              ) -> tuple[list[np.ndarray], TimingReport]:
    from ember_xla.dae import from_text
    from ember_xla.dae.bind import bind_program

    bind_program(from_text(program) if isinstance(program, str) else program, target)
    h, outputs, lib = _run(program, inputs, output_shapes, mode)
    try:
        res = ResultStruct()
        err = ctypes.create_string_buffer(1024)
        rc = lib.ember_run_simulate(CPtr(h), target_text(target).encode(), ctypes.byref(res), err,
                                    ctypes.c_int64(len(err)))
    finally:
        lib.ember_run_free(CPtr(h))
    if rc:
        raise ProgramDoesNotFit(f"{err.value.decode()} (target {target.name})")
    return outputs, report_of(target, res)


def time_program(program: Any, inputs: Sequence[Any], target: Target,
                 output_shapes: Sequence[Sequence[int]] | None = None) -> TimingReport:
    """``emulate_program``'s TimingReport from the addresses mode: the trace the access unit
    generates and the cases' op counts, without computing the outputs (take them from the
    native kernel). ``AddressesUnsupported`` when the program needs the full mode."""
    return _simulate(program, inputs, target, output_shapes, "addresses")[1]


def take_reports() -> list[tuple[str, TimingReport]]:
    """The timing reports the ``ember.emulate`` FFI target logged since the last call, in call
    order, as (cluster name, TimingReport); the log is cleared."""
    lib = load()
    out = []
    n = lib.ember_emulate_report_count()
    for i in range(n):
        name = ctypes.create_string_buffer(4096)
        ttext = ctypes.create_string_buffer(4096)
        res = ResultStruct()
        if lib.ember_emulate_report(ctypes.c_int64(i), name, ctypes.c_int64(len(name)), ttext,
                                    ctypes.c_int64(len(ttext)), ctypes.byref(res)):
            break
        out.append((name.value.decode(), _report_of_text(ttext.value.decode(), res)))
    lib.ember_emulate_report_drop(ctypes.c_int64(len(out)))
    return out


def _report_of_text(text: str, res: ResultStruct) -> TimingReport:
    """The report of a logged call, its target known by its ``target_text``."""
    f = text.split()
    clock, line_bytes, n_levels = float(f[3]), int(f[10]), int(f[21])
    names = [f[22 + 4 * i] for i in range(n_levels)]
    stats = [LevelStats(names[i], res.level_hits[i], res.level_misses[i])
             for i in range(n_levels)]
    return TimingReport(
        cycles=res.cycles, seconds=res.cycles / (clock * 1e9),
        access_busy=res.access_busy, execute_busy=res.execute_busy,
        queue_full_stall=res.queue_full, queue_empty_stall=res.queue_empty,
        bytes_loaded=res.bytes_loaded, dram_bytes=res.dram_lines * line_bytes,
        cache_hit_rate={s.name: s.hit_rate for s in stats}, tokens=res.tokens,
        entries=res.entries,
        bound=bound_of(res.cycles, res.execute_busy, res.dram_busy, res.access_busy))


def emulate_attributes(program: Any, target: Target, cluster: str) -> dict[str, str]:
    """The attributes of an ``ember.emulate`` custom-call (docs/DAE_PROGRAM.md, "The C++
    emulator and the FFI target")."""
    return {"cluster": cluster, "program": _program_text(program),
            "target": target_text(target)}
