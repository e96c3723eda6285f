"""The generic IR core: uses, replace-all-uses, erase, clone, DCE, topological order,
pattern driver (and the replacements it records) and pipeline strings."""

import dataclasses

import pytest

from ember_xla.ir.builder import Builder
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.passes import (
    ModulePass,
    PassPipeline,
    PipelineError,
    parse_pipeline,
    pipeline_string,
    register_pass,
)
from ember_xla.ir.rewriter import (
    PatternRewriter,
    RewritePattern,
    apply_patterns_greedily,
    recording_replacements,
    remove_dead_code,
)


def _graph():
    g = Graph("g")
    b = Builder(g)
    x = b.create("parameter", [], "t", {"parameter_number": 0}, name="x")
    y = b.create("negate", [x.result], "t")
    z = b.create("add", [x.result, y.result], "t")
    g.root = z
    return g, x, y, z


def test_uses_and_users():
    g, x, y, z = _graph()
    assert [u.name for u in x.result.users] == ["negate", "add"]
    assert x.result.uses == [(y, 0), (z, 0)]
    assert y.result.users == [z]


def test_replace_all_uses_and_erase():
    g, x, y, z = _graph()
    y.result.replace_all_uses_with(x.result)
    assert z.operands == [x.result, x.result]
    assert y.result.users == []
    g.erase(y)
    assert y not in g.ops and y.parent is None
    assert x.result.uses == [(z, 0), (z, 1)]


def test_erase_used_op_is_refused():
    g, x, y, z = _graph()
    with pytest.raises(ValueError, match="still used by add"):
        g.erase(y)


def test_clone_and_unique_names():
    g, x, y, z = _graph()
    c = Builder(g, before=z).insert(y.clone([x.result]))
    assert c.name == "negate.1" and c.attributes == y.attributes
    assert c.attributes is not y.attributes
    assert g.ops.index(c) == g.ops.index(z) - 1


def test_dead_code_removal_keeps_parameters_and_root():
    g, x, y, z = _graph()
    b = Builder(g)
    dead1 = b.create("exp", [y.result], "t")
    b.create("log", [dead1.result], "t")
    assert remove_dead_code(g) == 2
    assert [op.opcode for op in g.ops] == ["parameter", "negate", "add"]


def test_topological_order_fixes_misordered_ops():
    g, x, y, z = _graph()
    g.ops = [z, y, x]
    assert [op.name for op in g.topological()] == ["x", "negate", "add"]


def test_greedy_pattern_driver_reaches_fixpoint():
    g, x, y, z = _graph()
    m = Module("m")
    m.add(g, entry=True)

    class FoldDoubleNegate(RewritePattern):
        def match_and_rewrite(self, op, rw: PatternRewriter):
            if op.opcode == "negate" and op.operands[0].owner.opcode == "negate":
                rw.replace_all_uses(op.result, op.operands[0].owner.operands[0])

    b = Builder(g, before=z)
    n2 = b.create("negate", [y.result], "t")
    z.set_operand(1, n2.result)
    with recording_replacements() as replaced:
        apply_patterns_greedily(m, [FoldDoubleNegate()])
    assert [(a.owner, b.owner) for a, b in replaced] == [(n2, x)]  # what a checker compares
    assert z.operands[1] is x.result
    remove_dead_code(g)
    assert [op.opcode for op in g.ops] == ["parameter", "add"]
    rw = PatternRewriter()
    rw.replace_all_uses(z.operands[1], x.result)  # outside the block: nothing recorded
    assert len(replaced) == 1


@register_pass
@dataclasses.dataclass(frozen=True)
class _Counter(ModulePass):
    name = "test-counter"
    step: int = 1
    loud: bool = False
    label: str = "x"

    def apply(self, module):
        module.attributes["count"] = module.attributes.get("count", 0) + self.step


def test_pipeline_strings():
    ps = parse_pipeline("test-counter,test-counter{step=5 loud=true label=hi}")
    assert ps[1] == _Counter(step=5, loud=True, label="hi")
    assert pipeline_string(ps).startswith("test-counter{step=1 loud=False label=x},")
    m = Module("m")
    PassPipeline.from_spec("test-counter{step=2},test-counter").apply(m)
    assert m.attributes["count"] == 3


@pytest.mark.parametrize("bad, msg", [
    ("nope", "unknown pass 'nope'"),
    ("test-counter{step=x}", "expects int"),
    ("test-counter{zzz=1}", "unknown option 'zzz'"),
    ("test-counter{step=1", "unbalanced"),
    ("test-counter{step}", "not key=value"),
])
def test_pipeline_errors(bad, msg):
    with pytest.raises(PipelineError, match=msg):
        parse_pipeline(bad)
