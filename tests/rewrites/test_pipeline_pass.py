"""The cluster rewrite as a pass: ``rewrite_module`` never mutates its input (names, ids, op
lists, graphs), the pass is registered and runs from a pipeline string, and the rewrites do not
depend on the runtime."""

from __future__ import annotations

import ast
from pathlib import Path

from ember_xla.hlo.parser import parse_module as module_from_text
from ember_xla.ir.passes import PassPipeline
from ember_xla.rewrites.pipeline import rewrite_module

FIXTURE = Path(__file__).parent / "fixtures" / "jax_gnn_segment_sum.hlo"


def snapshot(m):
    return [(g.name, g.id, [(op.name, op.id, op.opcode, [v.owner.name for v in op.operands])
                            for op in g.ops]) for g in m.graphs]


def hand_built():
    """A module as a user's code might hold it: ids cleared, names repeated across
    computations (XLA would reject that on export; ours must not be renamed by a rewrite)."""
    m = module_from_text(FIXTURE.read_text(), str(FIXTURE))
    for g in m.graphs:
        g.id = None
        for op in g.ops:
            op.id = None
    return m


def test_rewrite_module_leaves_the_input_untouched():
    m = hand_built()
    before = snapshot(m)
    r = rewrite_module(m)
    assert r.clusters, "the fixture has a segment_sum cluster"
    assert r.module is not m
    assert snapshot(m) == before
    assert not any(op.opcode == "custom-call" for op in m.walk())


def test_pass_runs_from_a_pipeline_string():
    m = module_from_text(FIXTURE.read_text(), str(FIXTURE))
    PassPipeline.from_spec("ember-rewrite-clusters{group=false}").apply(m)
    targets = [op.attributes.get("custom_call_target") for op in m.walk()
               if op.opcode == "custom-call"]
    assert targets == ["ember.segment_reduce"]


def test_rewrites_do_not_import_the_runtime():
    """Rewrites edit IR; running modules is the runtime's. The one exception reads what
    XLA:CPU itself decides: ``ynn_fusions`` compiles a tagged copy of the module (inside the
    function that reads it) to see which ops XLA's YNNPACK fusions take in."""
    import ember_xla.rewrites as pkg

    offenders = []
    for path in Path(pkg.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names
                          if n.startswith("ember_xla.runtime")]
    assert offenders == ["ynn_fusions.py: ember_xla.runtime.execute"]


def test_kernel_attributes_stay_structured_until_export():
    from ember_xla.custom_calls import ATTRS_KEY, call_attributes
    from ember_xla.hlo.printer import print_module
    from ember_xla.hlo_import.proto import module_from_proto, module_to_proto

    m = module_from_text(FIXTURE.read_text(), str(FIXTURE))
    r = rewrite_module(m)
    (cc,) = [op for op in r.module.walk() if op.opcode == "custom-call"]
    assert "backend_config" not in cc.attributes
    assert cc.attributes[ATTRS_KEY]["combiner"] == "sum"
    text = print_module(r.module)
    assert 'backend_config={combiner = "sum"' in text
    back = module_from_proto(module_to_proto(r.module))
    (cc2,) = [op for op in back.walk() if op.opcode == "custom-call"]
    assert call_attributes(cc2) == call_attributes(cc)
    assert ATTRS_KEY in cc.attributes  # export did not encode the op in place
