"""The timing parameters of one NPU core and of the shared global memory, in cycles, derived
from a target description (``configs/npu.toml``); shared by the emulator and the cost model
so both read the same numbers."""

from __future__ import annotations

import dataclasses

from ember_xla.machines.config import Target, TargetError

STRATEGIES = ("gm", "l1", "gm_ub", "l1_ub")   # the four per-core lookup strategies
L1_STRATEGIES = ("l1", "l1_ub")
UB_STRATEGIES = ("gm_ub", "l1_ub")


@dataclasses.dataclass(frozen=True)
class Machine:
    cores: int
    clock_ghz: float
    latency: float            # DMA issue -> data, cycles
    core_bpc: float           # per-core DMA port, bytes/cycle
    global_bpc: float         # global memory, bytes/cycle, shared by all cores
    outstanding: int
    issue: int                # scalar cycles per descriptor
    index: int                # scalar cycles per index read
    granule: int
    setup: int                # cycles per piece (table share on a core)
    l1_bytes: int
    l1_latency: int
    l1_bpc: float
    ub_bytes: int
    vector_bytes: int         # bytes one vector op covers
    op_add: int
    op_load: int
    op_store: int
    preload: str

    def xfer(self, nbytes: int) -> int:
        """Bytes a transfer of ``nbytes`` moves (whole granules)."""
        return -(-nbytes // self.granule) * self.granule

    def chunks(self, row_bytes: int) -> int:
        return -(-row_bytes // self.vector_bytes)

    def stage_rows(self, row_bytes: int) -> int:
        """Rows per UB staging chunk: the UB's first half, double-buffered."""
        return max(1, (self.ub_bytes // 4) // self.xfer(row_bytes))

    def out_block_rows(self, row_bytes: int) -> int:
        """Pooled rows collected in the UB before one DMA writes them out."""
        return max(1, (self.ub_bytes // 8) // row_bytes)

    def l1_rows(self, row_bytes: int) -> int:
        return self.l1_bytes // row_bytes

    def seconds(self, cycles: float) -> float:
        return cycles / (self.clock_ghz * 1e9)


def machine_of(target: Target) -> Machine:
    """The NPU machine of ``target``; a target without ``[dma]`` is refused in one line."""
    n = target.npu
    if n is None:
        raise TargetError(f"{target.source}: [dma]: missing (expected an NPU target with [dma],"
                          " [unified_buffer] and scratchpad timing, like configs/npu.toml)")
    if target.scratchpad_bytes <= 0:
        raise TargetError(f"{target.source}: scratchpad.size_bytes: expected a positive size "
                          "on an NPU target")
    ck = target.clock_ghz
    ex = target.execute
    return Machine(
        cores=target.cores, clock_ghz=ck, latency=n.dma.latency_ns * ck,
        core_bpc=n.dma.bandwidth_gb_per_s / ck, global_bpc=target.dram.bandwidth_gb_per_s / ck,
        outstanding=n.dma.outstanding, issue=n.dma.issue_cycles, index=n.dma.index_cycles,
        granule=n.dma.granule_bytes, setup=n.dma.piece_setup_cycles,
        l1_bytes=target.scratchpad_bytes, l1_latency=n.l1_latency_cycles,
        l1_bpc=float(n.l1_bytes_per_cycle), ub_bytes=n.ub_bytes,
        vector_bytes=max(1, ex.vector_bits // 8), op_add=ex.op_cycles["add"],
        op_load=ex.op_cycles["load"], op_store=ex.op_cycles["store"], preload=n.preload)


def check_preload(mode: str) -> str:
    if mode not in ("model", "batch"):
        raise ValueError(f"preload: expected model or batch, got {mode!r}")
    return mode


