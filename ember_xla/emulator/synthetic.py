"""Synthetic traces of an embedding bag (sum) as each Ember level would run it, made directly
from the indices — for the timing model's tests and calibration-free sanity checks until the
DLC interpreter records traces of real programs. Layout: the table at address 0, row-major;
indices after it; one data-queue entry per element (O0), per vector chunk (O1) or per row
(O2/O3: bufferized); one end-of-bag callback per bag."""

from __future__ import annotations

import numpy as np

from ember_xla.emulator.trace import Trace

ELEMENT, CHUNK, ROW = "element", "chunk", "row"


def embedding_bag_trace(rows: int, dim: int, ids: np.ndarray, offsets: np.ndarray,
                        granularity: str = ROW, vl: int = 16, elem_bytes: int = 4,
                        index_bytes: int = 4) -> Trace:
    """The trace of ``out[b] = sum(table[ids[offsets[b]:offsets[b+1]]])``."""
    tr = Trace()
    row_bytes = dim * elem_bytes
    idx_base = rows * row_bytes
    chunks = -(-dim // vl)
    if granularity == ELEMENT:
        tr.define_case(1, {"load": 1, "add": 1, "store": 1, "scalar": 1}, pops=1)
    elif granularity == CHUNK:
        tr.define_case(1, {"load": 1, "add": 1, "store": 1, "scalar": 1}, pops=1)
    elif granularity == ROW:
        tr.define_case(1, {"load": chunks, "add": chunks, "store": chunks}, pops=1)
    else:
        raise ValueError(f"granularity must be element, chunk or row, not {granularity!r}")
    tr.define_case(2, {"scalar": 1}, pops=0)  # end of bag: bump the output row counter
    for b in range(len(offsets) - 1):
        for j in range(int(offsets[b]), int(offsets[b + 1])):
            ix = tr.load(idx_base + j * index_bytes, index_bytes, queued=False)
            base = int(ids[j]) * row_bytes
            if granularity == ROW:
                tr.load(base, row_bytes, dep=ix)
                tr.push(row_bytes)
                tr.token(1)
                continue
            step = 1 if granularity == ELEMENT else vl
            for k in range(0, dim, step):
                n = min(step, dim - k) * elem_bytes
                tr.load(base + k * elem_bytes, n, dep=ix)
                tr.push(n)
                tr.token(1)
        tr.token(2)
    return tr
