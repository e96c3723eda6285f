"""Multi-core NPU emulator: per-core DMA engines over one shared global memory, a
scratchpad ("L1"), a unified buffer and a vector unit per core; four per-core lookup
strategies for a table's share of an embedding-bag batch. ``run.emulate`` is the entry."""
