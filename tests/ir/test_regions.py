"""The IR core's regions, blocks, generic text form, verifier, clone and interpreter."""

import pytest

from ember_xla.ir.block import Block, Region
from ember_xla.ir.dialect import Dialect, VerifyError, register_dialect
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.interpreter import Interpreter, InterpreterFunctions, OpCounter, impl
from ember_xla.ir.opdef import OpDef
from ember_xla.ir.operation import Operation
from ember_xla.ir.parser import IRParseError, parse_module, parse_type
from ember_xla.ir.printer import print_module
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern, count_edits
from ember_xla.ir.traits import IsTerminator, SingleBlock, has_parent
from ember_xla.ir.types import F32, INDEX, DialectType, MemRefType, VectorType
from ember_xla.ir.verify import verify_generic_module

toy = register_dialect(Dialect("toy"))


@toy.add_op
class LoopOp(OpDef):
    """toy.loop(n, init) ({^bb0(%i: index, %acc: f32): ... toy.yield %acc'}) -> f32"""

    opcode = "toy.loop"
    traits = frozenset({SingleBlock})

    def verify_(self) -> None:
        self.expect_counts(operands=2, results=1, regions=1)
        if len(self.body.args) != 2:
            raise self.fail("body takes (index, accumulator)")


@toy.add_op
class YieldOp(OpDef):
    opcode = "toy.yield"
    traits = frozenset({IsTerminator, has_parent("toy.loop")})


@toy.add_op
class ReturnOp(OpDef):
    opcode = "toy.return"
    traits = frozenset({IsTerminator})


class ToyFunctions(InterpreterFunctions):
    @impl("toy.const")
    def const(self, interp, op, args):
        return (op.attributes["value"],)

    @impl("toy.add")
    def add(self, interp, op, args):
        return (args[0] + args[1],)

    @impl("toy.loop")
    def loop(self, interp, op, args):
        acc = args[1]
        for i in range(args[0]):
            (acc,) = interp.run_region(op.regions[0], [i, acc])
        return (acc,)

    @impl("toy.yield")
    def yield_(self, interp, op, args):
        return args

    @impl("toy.return")
    def ret(self, interp, op, args):
        return args


def build_sum() -> Module:
    """sum_{i<n} (x + i)"""
    m = Module("toy")
    g = m.add(Graph("f", arg_types=[INDEX, F32]), entry=True)
    n, x = g.args
    zero = g.append(Operation("toy.const", [], [F32], {"value": 0.0}))
    body = Block([INDEX, F32])
    i, acc = body.args
    s = body.append(Operation("toy.add", [x, i], [F32]))
    t = body.append(Operation("toy.add", [acc, s.result], [F32]))
    body.append(YieldOp.create([t.result]))
    loop = g.append(LoopOp.create([n, zero.result], [F32], regions=[Region([body])]))
    g.append(ReturnOp.create([loop.result]))
    return m


GOLDEN = """\
module @toy attributes {entry = @f} {
  func @f(%arg0: index, %arg1: f32) {
    %0 = "toy.const"() {value = 0.0} : () -> f32
    %1 = "toy.loop"(%arg0, %0) ({
    ^bb0(%arg0_1: index, %arg1_1: f32):
      %2 = "toy.add"(%arg1, %arg0_1) : (f32, index) -> f32
      %3 = "toy.add"(%arg1_1, %2) : (f32, f32) -> f32
      "toy.yield"(%3) : (f32) -> ()
    }) : (index, f32) -> f32
    "toy.return"(%1) : (f32) -> ()
  }
}
"""


def test_print_golden_and_fixed_point():
    m = build_sum()
    text = print_module(m)
    assert text == GOLDEN
    m2 = parse_module(text)
    assert print_module(m2) == text
    assert isinstance(m2.entry.ops[1], LoopOp)  # typed class chosen by the parser


def test_verify_and_walk():
    m = build_sum()
    verify_generic_module(m)
    assert [op.opcode for op in m.walk()] == [
        "toy.const", "toy.loop", "toy.add", "toy.add", "toy.yield", "toy.return"]


def test_values_from_enclosing_scope_visible_but_not_from_siblings():
    m = build_sum()
    g = m.entry
    loop = g.ops[1]
    inner = loop.body.ops[0]
    # reading the loop's own result inside its body is not visible (defined later)
    inner.set_operand(0, loop.result)
    with pytest.raises(VerifyError, match="not visible"):
        verify_generic_module(m)


def test_terminator_and_parent_traits():
    m = build_sum()
    g = m.entry
    g.insert(0, YieldOp.create([g.args[1]]))
    with pytest.raises(VerifyError, match="terminator must end|must be inside"):
        verify_generic_module(m)


def test_op_verify_hook():
    m = build_sum()
    loop = m.entry.ops[1]
    loop.body.add_arg(F32)
    with pytest.raises(VerifyError, match="body takes"):
        verify_generic_module(m)


def test_interpreter_runs_nested_regions_and_counts():
    m = build_sum()
    it = Interpreter([ToyFunctions()], [OpCounter()])
    (out,) = it.run_graph(m.entry, [4, 1.5])
    assert out == sum(1.5 + i for i in range(4))
    assert it.counters["op:toy.add"] == 8


def test_clone_is_deep_and_independent():
    m = build_sum()
    c = m.clone()
    assert print_module(c) == print_module(m)
    loop_c = c.entry.ops[1]
    assert loop_c.body is not m.entry.ops[1].body
    assert loop_c.body.ops[0].operands[0] is c.entry.args[1]  # outer value remapped
    c.entry.ops[0].attributes["value"] = 9.0
    assert m.entry.ops[0].attributes["value"] == 0.0


class FoldAddZero(RewritePattern):
    """x + const 0.0 -> x (nested ops reached by the greedy driver)."""

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if op.opcode != "toy.add":
            return
        b = op.operands[1]
        if getattr(b.owner, "opcode", None) == "toy.const" and b.owner.attributes["value"] == 0:
            rewriter.replace_op(op, op.operands[0])


def test_rewriter_reaches_nested_blocks():
    m = build_sum()
    body = m.entry.ops[1].body
    z = body.insert(0, Operation("toy.const", [], [F32], {"value": 0.0}))
    body.ops[2].set_operand(1, body.ops[1].result)
    extra = Operation("toy.add", [body.ops[2].result, z.result], [F32])
    body.insert(3, extra)
    body.ops[-1].set_operand(0, extra.result)
    assert count_edits(m, [FoldAddZero()]) > 0
    assert "toy.add" in print_module(m)
    assert not any(o is extra for o in m.walk())
    verify_generic_module(m)


@pytest.mark.parametrize("text", [
    "index", "i1", "i64", "f32", "bf16", "vector<8xf32>", "vector<4x8xi1>",
    "memref<?x?xf64>", "memref<16xindex>", "!slc.stream<index>", "!dlc.tu",
    "!slc.stream<vector<8xf32>>", "!slc.stream<memref<?xf32>>"])
def test_types_round_trip(text):
    assert str(parse_type(text)) == text


def test_types_are_values():
    assert parse_type("vector<8xf32>") == VectorType((8,), F32)
    assert parse_type("memref<?xf32>") == MemRefType((None,), F32)
    assert parse_type("!a.b<3, index>") == DialectType("a.b", (3, INDEX))


@pytest.mark.parametrize("text,where", [
    ("module @m {\n  func @f() {\n    \"toy.return\"(%x) : (f32) -> ()\n  }\n}", "3:18"),
    ("module @m {\n  func @f(%a: index) {\n    \"toy.return\"(%a) : (f32) -> ()\n  }\n}",
     "3:24"),
    ("module @m {\n  func @f() {\n    %0 = \"toy.c\"() : () -> qq\n  }\n}", "3:28"),
    ("module @m {\n  func @f() {\n", "3:1"),
])
def test_parse_errors_name_line_and_column(text, where):
    with pytest.raises(IRParseError, match=where):
        parse_module(text, "t.mlir")
