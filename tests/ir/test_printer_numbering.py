"""Printed SSA numbers are positions, not names: after parsing, editing (a new op in the
middle) and printing, the text must still print back to itself (a fixed point), so numeric
names read back by the parser are renumbered instead of kept as hints."""

from ember_xla.ir.operation import Operation
from ember_xla.ir.parser import parse_module
from ember_xla.ir.printer import print_module
from ember_xla.ir.types import F32

TEXT = """\
module @m attributes {entry = @f} {
  func @f(%x: f32) {
    %0 = "toy.a"(%x) : (f32) -> f32
    %1 = "toy.b"(%0) : (f32) -> f32
    "toy.ret"(%1) : (f32) -> ()
  }
}
"""


def test_numbers_renumbered_after_an_edit():
    m = parse_module(TEXT)
    g = m.entry
    g.insert(1, Operation("toy.c", [g.ops[0].result], [F32]))
    once = print_module(m)
    assert '%1 = "toy.c"(%0)' in once and '%2 = "toy.b"(%0)' in once
    assert print_module(parse_module(once)) == once


def test_named_values_keep_their_names():
    text = TEXT.replace("%0", "%row").replace("%1", "%acc")
    assert print_module(parse_module(text)) == text
