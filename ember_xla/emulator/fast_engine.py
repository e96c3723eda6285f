"""The fast engine of the emulator: a cluster's outputs are its bit-exact native kernel's (from a
captured run), its timing comes from the C++ executor's addresses mode (``executor_cc``:
the same trace and case op counts as the full executor, hence the same cycles, without
computing any value). A program whose addresses or control flow depend on computed data
cannot run in the addresses mode: it runs in the full mode, and its outputs are then compared
with the native kernel's (``mode`` says which ran)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember_xla.emulator.executor_cc import AddressesUnsupported, emulate_program, time_program
from ember_xla.emulator.timing import TimingReport
from ember_xla.machines.config import Target

ADDRESSES, FULL = "addresses", "full"


@dataclasses.dataclass
class FastTiming:
    timing: TimingReport
    mode: str                                  # ADDRESSES or FULL
    outputs: list[np.ndarray] | None = None    # FULL: the emulated outputs (to check)
    why_full: str = ""                         # FULL: why the addresses mode could not run it


def time_cluster(program: Any, operands: Sequence[Any], results: Sequence[np.ndarray],
                 target: Target) -> FastTiming:
    """Time ``program`` on ``operands`` (its native results give the output shapes)."""
    shapes = [np.shape(r) for r in results]
    try:
        return FastTiming(time_program(program, operands, target, shapes), ADDRESSES)
    except AddressesUnsupported as e:
        outs, timing = emulate_program(program, operands, target, shapes)
        return FastTiming(timing, FULL, outs, str(e))
