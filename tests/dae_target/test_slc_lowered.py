"""The SLC printed form of lowered clusters: the golden O0 text of Ember's sum embedding bag
(three loop levels, the index mem stream chained into the row stream, one callback per
element), print -> parse -> print fixed points for every kind, and verifier rules."""

from pathlib import Path

import pytest
import slc_specs

from ember_xla.dae_target.dialects import slc
from ember_xla.dae_target.lower.to_slc import lower_to_slc
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module
from ember_xla.ir.verify import verify_generic_module

GOLDEN_O0 = (Path(__file__).parent / "golden" / "offsets_bag_sum_O0.mlir").read_text()


def test_sum_offsets_bag_o0_golden():
    """Regenerate after an intended change: print_module(lower_to_slc(offsets_bag()))."""
    m = lower_to_slc(slc_specs.offsets_bag())
    verify_generic_module(m)
    assert print_module(m) == GOLDEN_O0


def test_o0_structure_is_embers():
    """Three nested slc.for levels; the row stream table[i, k] reads the index stream
    indices[j] (through its clamp) in the middle loop; one callback per element."""
    g = lower_to_slc(slc_specs.offsets_bag()).entry
    bags = [op for op in g.ops if isinstance(op, slc.ForOp)]
    assert len(bags) == 1
    mids = [op for op in bags[0].body.ops if isinstance(op, slc.ForOp)]
    assert len(mids) == 1
    inner = [op for op in mids[0].body.ops if isinstance(op, slc.ForOp)]
    assert len(inner) == 1 and not any(isinstance(o, slc.ForOp) for o in inner[0].body.ops)
    row = next(o for o in inner[0].body.ops if isinstance(o, slc.MemStreamOp))
    chain = row.operands[1].owner
    while isinstance(chain, slc.AluStreamOp):
        chain = chain.operands[0].owner
    assert isinstance(chain, slc.MemStreamOp) and chain.parent is mids[0].body
    assert chain.operands[1] is mids[0].iv
    callbacks = [o for o in inner[0].body.ops if isinstance(o, slc.CallbackOp)]
    assert len(callbacks) == 1


SPECS = {
    "bag_sum": lambda: slc_specs.offsets_bag(),
    "bag_mean_fill_wrap_w": lambda: slc_specs.offsets_bag(combiner="mean", mode="fill",
                                                          wrap=True, weighted=True),
    "bag_sqrt_n_bf16": lambda: slc_specs.offsets_bag(combiner="sqrt_n", dtype="bf16"),
    "bag_max_s64_bits32": lambda: slc_specs.offsets_bag(combiner="max", init=float("-inf"),
                                                        ids="s64", index_bits=32),
    "bag_zero_rows_fill": lambda: slc_specs.offsets_bag(n=0, mode="fill"),
    "seg_sum": lambda: slc_specs.segment_reduce(),
    "seg_mean": lambda: slc_specs.segment_reduce(combiner="mean"),
    "seg_min_clip": lambda: slc_specs.segment_reduce(combiner="min", mode="clip"),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_print_parse_print_fixed_point(name):
    m = lower_to_slc(SPECS[name]())
    verify_generic_module(m)
    text = print_module(m)
    again = parse_module(text, name)
    verify_generic_module(again)
    assert print_module(again) == text
    assert type(again.entry.ops[-1]).__name__ == "ReturnOp"


def test_from_stream_outside_a_callback_is_rejected():
    m = lower_to_slc(slc_specs.offsets_bag())
    g = m.entry
    loop = next(op for op in g.ops if isinstance(op, slc.ForOp))
    bad = slc.FromStreamOp.create([loop.iv], [loop.iv.type.elem])
    loop.body.insert(0, bad)
    with pytest.raises(VerifyError, match="inside a callback"):
        verify_generic_module(m)


def test_slc_for_bounds_must_be_index_streams():
    """An i32 offsets stream used directly as a bound (without the cast alu stream)."""
    m = lower_to_slc(slc_specs.offsets_bag())
    bags = next(op for op in m.entry.ops if isinstance(op, slc.ForOp))
    lookups = next(op for op in bags.body.ops if isinstance(op, slc.ForOp))
    cast = lookups.lb.owner
    assert isinstance(cast, slc.AluStreamOp) and cast.attributes["op"] == "cast"
    lookups.set_operand(0, cast.operands[0])
    with pytest.raises(VerifyError, match="bounds and step must be"):
        verify_generic_module(m)
