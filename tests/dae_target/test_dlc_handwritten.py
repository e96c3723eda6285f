"""The hand-written DLC sum embedding bag: prints exactly as its golden file, parses back to the
same text, equals numpy on edge cases, and its interpreter counters are the exact closed-form
counts of the program (what the emulator's timing builds on)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from slc_examples import bag_inputs, bag_reference, run_bag

from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.interp.dlc import counts
from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module
from ember_xla.ir.verify import verify_generic_module

GOLDEN = Path(__file__).parents[1] / "golden" / "dae" / "eb_handwritten_dlc.mlir"


def _strip_comments(text: str) -> str:
    return "".join(ln for ln in text.splitlines(keepends=True)
                   if not ln.startswith("//") and ln.strip())


def test_prints_as_golden_and_round_trips():
    m = sum_bag_dlc()
    verify_generic_module(m)
    text = print_module(m)
    assert text.strip() == _strip_comments(GOLDEN.read_text()).strip()
    again = parse_module(text)
    verify_generic_module(again)
    assert print_module(again) == text


# (bag lengths, rows, D, id bits, vl)
EDGES = [
    ([3, 0, 2, 5], 10, 13, 32, 8),     # an empty bag, D not a multiple of VL
    ([0, 0], 4, 8, 32, 8),             # only empty bags
    ([], 4, 8, 64, 8),                 # no bags at all
    ([4, 1], 6, 1, 64, 4),             # D = 1
    ([7], 3, 16, 32, 16),              # duplicate ids, D = VL
    ([2, 2, 2], 1, 5, 32, 2),          # a one-row table: every id the same
]


@pytest.mark.parametrize("lengths,rows,dim,bits,vl", EDGES)
def test_equals_numpy(lengths, rows, dim, bits, vl):
    rng = np.random.default_rng(len(lengths) * 31 + dim)
    inputs = bag_inputs(rng, lengths, rows, dim, id_bits=bits, dup=True)
    out, _ = run_bag(sum_bag_dlc(vl=vl, id_bits=bits), inputs)
    np.testing.assert_array_equal(out, bag_reference(inputs))


@pytest.mark.parametrize("lengths,rows,dim,bits,vl", EDGES)
def test_counters_are_exact(lengths, rows, dim, bits, vl):
    rng = np.random.default_rng(7)
    inputs = bag_inputs(rng, lengths, rows, dim, id_bits=bits)
    _, raw = run_bag(sum_bag_dlc(vl=vl, id_bits=bits), inputs)
    c = counts(raw)
    bags, lookups = len(lengths), sum(lengths)
    chunks = -(-dim // vl)
    assert c.get("dlc.callbacks.0", 0) == bags                    # zero a row per bag
    assert c.get("dlc.callbacks.1", 0) == lookups                 # add one row per lookup
    assert c.get("dlc.callbacks.2", 0) == bags                    # next output row per bag
    assert c["dlc.tokens"] == 2 * bags + lookups
    assert c["dlc.queue_entries"] == c["dlc.buffers"] == lookups
    assert c["dlc.queue_bytes"] == lookups * dim * 4
    assert c["dlc.buffer_elements"] == lookups * dim
    assert c["dlc.tu_starts"] == 1 + bags + lookups
    assert c["dlc.tu_iterations"] == bags + lookups + lookups * chunks
    # loads: offsets[b], offsets[b+1] (8 bytes), ids[j] (bits/8), a row of D f32
    assert c["stream_elements"] == 2 * bags + lookups + lookups * dim
    assert c["stream_bytes"] == 16 * bags + lookups * (bits // 8) + lookups * dim * 4
    assert c["dlc.queue_peak"] == (1 if lookups else 0)
