"""Multi-output clusters (rewrites/multi_output.py): one gather feeding several segment
reductions becomes one ``ember.multi_segment_reduce`` call -- the gather is no longer computed
in XLA -- in the idiom zoo and the real-library corpus (jraph, flax); calls that do not read the
same lookup stay separate; the DAE lowering refuses the call with a reason; the call survives an
HloModuleProto round trip. Equality with the original on random and edge inputs is asserted for
these models by test_rewrite_idioms.py / test_library_models.py (multi_output on by default);
here once more against the rewrite without merging, on fresh inputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ember_xla.custom_calls import SEGMENT_REDUCE, call_attributes
from ember_xla.hlo.shape import Shape
from ember_xla.hlo_import.proto import module_from_proto, module_to_proto
from ember_xla.ir.operation import Operation
from ember_xla.rewrites.multi_output import MULTI, same_value
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

im = sys.modules["idiom_models"]       # loaded by conftest.py
lm = sys.modules["library_models"]

# model -> the combiners of its one multi call (a mean is its sum; the count reads no rows)
ZOO = {"jax_index_segment_sum_and_max": ["sum", "max"],
       "jax_index_weighted_segment_sum_and_max": ["sum", "max"],
       "jax_take_wrap_segment_mean_max_min": ["sum", "max", "min"],
       "jax_take_fill_segment_sum_and_min_sorted": ["sum", "min"],
       "tf_gather_unsorted_segment_sum_and_max": ["sum", "max"]}
LIBRARY = {"jraph_graph_network_sum_and_max": ["sum", "max"],
           "flax_embed_segment_mean_and_max": ["sum", "max"]}


def _calls(module, target):
    return [op for op in module.entry.ops if op.opcode == "custom-call"
            and op.attributes.get("custom_call_target") == target]


def _float_gathers(graph):
    return [op.name for op in graph.ops if op.opcode == "gather"
            and op.operands[0].type.element_type in ("f32", "bf16", "f16")]


def _model(name):
    if name in ZOO:
        return module_from_proto(im.hlo(name)[0], name), lambda seed: im.inputs(name, "edge", seed)
    return lm.export(name).module, lambda seed: lm.inputs(name, "edge", seed)


@pytest.mark.parametrize("name", sorted(ZOO) + sorted(LIBRARY))
def test_one_lookup_several_reductions_is_one_call(name):
    module, inputs = _model(name)
    result = rewrite_module(module)
    (call,) = _calls(result.module, MULTI)
    assert not _calls(result.module, SEGMENT_REDUCE.name)
    entry = result.module.entry
    assert not _float_gathers(entry), "the lookup is still computed in XLA"
    # the other members' copies of the index arithmetic are erased with them (TF's unused
    # constants were dead in the original already)
    def dead(g):
        return {op.name for op in g.ops if not op.users and op is not g.root}

    assert dead(entry) <= dead(module.entry)
    want = {**ZOO, **LIBRARY}[name]
    assert call_attributes(call)["combiners"].split(",") == want
    assert len(call.result.type.tuple_shapes) == len(want) == len(result.clusters)
    (grp,) = [g for g in result.groups if g.get("multi_output")]
    assert grp["combiners"] == want and len(grp["members"]) == len(want)
    assert all(c["merged_into"] == call.name for c in result.clusters)
    separate = rewrite_module(module, multi_output=False)
    assert len(_calls(separate.module, SEGMENT_REDUCE.name)) == len(want)
    assert not _calls(separate.module, MULTI)
    args = inputs(1)
    for a, b in zip(run_module(result.module, args), run_module(separate.module, args),
                    strict=True):
        assert a.tobytes() == b.tobytes() or np.array_equal(a, b, equal_nan=True)


def _jax_model(f, n=12, d=4, length=10):
    from ember_xla.hlo_import.jax_source import from_jax

    rng = np.random.default_rng(0)
    args = [rng.standard_normal((n, d)).astype(np.float32),
            rng.integers(-2, n + 2, length).astype(np.int32),
            rng.integers(-1, 5, length).astype(np.int32),
            rng.standard_normal(length).astype(np.float32)]
    module = from_jax(f, *args).module
    return module, args[:len(module.entry.params())]  # jit drops an unused w


def _not_merged(kind):
    import jax

    def f(t, i, s, w):
        rows = t[i]
        if kind == "weighted":
            a = jax.ops.segment_sum(rows * w[:, None], s, num_segments=4)
        else:
            a = jax.ops.segment_sum(rows, s, num_segments=4)
        if kind == "other_ids":
            b = jax.ops.segment_max(rows, (s + 1) % 4, num_segments=4)
        elif kind == "other_segments":
            b = jax.ops.segment_max(rows, s, num_segments=5)
        else:
            b = jax.ops.segment_max(rows, s, num_segments=4)
        return a, b

    return f


@pytest.mark.parametrize("kind", ["weighted", "other_ids", "other_segments"])
def test_different_lookups_stay_separate_calls(kind):
    module, args = _jax_model(_not_merged(kind))
    result = rewrite_module(module)
    assert len(result.clusters) == 2, result.near_misses
    assert not _calls(result.module, MULTI)
    assert len(_calls(result.module, SEGMENT_REDUCE.name)) == 2
    for a, b in zip(run_module(result.module, args), run_module(module, args), strict=True):
        assert a.tobytes() == b.tobytes() or np.array_equal(a, b, equal_nan=True)


def test_same_value_compares_pure_instructions():
    s32 = Shape.array("s32", (4,))
    p = Operation("parameter", [], [s32], {"parameter_number": 0}, name="p")
    q = Operation("parameter", [], [s32], {"parameter_number": 1}, name="q")

    def const(v, name):
        return Operation("constant", [], [s32], {"literal": {"s32s": [v] * 4}}, name=name)

    c3, c3b, c4 = const(3, "c3"), const(3, "c3b"), const(4, "c4")
    a = Operation("remainder", [p.result, c3.result], [s32], name="a")
    b = Operation("remainder", [p.result, c3b.result], [s32], name="b",
                  attributes={"metadata": {"op_name": "elsewhere"}})
    c = Operation("remainder", [p.result, c4.result], [s32], name="c")
    d = Operation("remainder", [q.result, c3.result], [s32], name="d")
    assert same_value(a.result, b.result)          # copies (metadata aside) are the same
    assert not same_value(a.result, c.result)      # another constant
    assert not same_value(a.result, d.result)      # another parameter
    assert not same_value(p.result, q.result)


def test_dae_spec_npu_refusal_and_proto_round_trip():
    """The call reads as a DAE spec (one member per combiner, lowered in one pass); the NPU
    placement, whose strategies pool one result per call, refuses it with the reason."""
    from ember_xla.call_specs import cluster_spec
    from ember_xla.placement.from_model import placeable_clusters

    result = rewrite_module(lm.export("jraph_graph_network_sum_and_max").module)
    (call,) = _calls(result.module, MULTI)
    assert cluster_spec(call).combiners == (("sum", 0.0), ("max", -float("inf")))
    placed = placeable_clusters(result.module)
    assert [n for _, n, _ in placed] == [call.name]
    assert "multi-output call" in placed[0][2]
    back = module_from_proto(module_to_proto(result.module), "round trip")
    (again,) = _calls(back, MULTI)
    assert call_attributes(again) == {"combiners": "sum,max", "inits": "0.0,-inf",
                                      "index_mode": "clip", "wrap_negative": True,
                                      "weighted": False, "index_bits": 64}


def _near_miss_model(kind):
    import jax

    def f(t, i, s, w):
        rows = t[i]
        total = jax.ops.segment_sum(rows, s, num_segments=4)
        if kind == "escapes":     # the rows are also an output: the reductions get a copy
            return total, jax.ops.segment_max(rows, s, num_segments=4), rows
        if kind == "squares":     # PNA's std: segment_sum(rows * rows) is not a weighted bag
            return (total, jax.ops.segment_sum(rows * rows, s, num_segments=4),
                    jax.ops.segment_max(rows, s, num_segments=4))
        # relu between the gather and the max: not a lookup reduction
        return total, jax.ops.segment_max(jax.nn.relu(rows), s, num_segments=4)

    return f


@pytest.mark.parametrize("kind,clusters,reasons", [
    ("escapes", 2, []),
    ("squares", 3, ["takes the gathered rows as a computed operand"]),  # a segment sum of rows
    ("relu", 1, ["not from a row gather"]),
])
def test_multi_output_spellings_not_rewritten_are_reported(kind, clusters, reasons):
    """Every reduction of the shared gather is in a cluster or a near-miss with its reason;
    rows that escape elsewhere do not keep the reductions reading them out of clusters."""
    from ember_xla.rewrites.canonicalize import canonicalize
    from ember_xla.rewrites.coverage import lookup_reductions

    module, args = _jax_model(_near_miss_model(kind))
    result = rewrite_module(module)
    assert len(result.clusters) == clusters
    got = sorted(n["reason"] for n in result.near_misses)
    assert len(got) == len(reasons) and all(
        any(r in g for g in got) for r in reasons), got
    work = module.clone()
    canonicalize(work)
    named = {c["location"]["instruction"] for c in result.clusters} | {
        n["location"]["instruction"] for n in result.near_misses}
    reductions = [r.name for _, r in lookup_reductions(work)]
    assert len(reductions) == 2 + (kind == "squares") and set(reductions) <= named
    for a, b in zip(run_module(result.module, args), run_module(module, args), strict=True):
        assert a.tobytes() == b.tobytes() or np.array_equal(a, b, equal_nan=True)


def test_cli_rewrite_reports_the_multi_output_call(cli, tmp_path):
    """``ember-xla rewrite --verify``: one multi call, bitwise equal, listed in the report."""
    fixture = Path(__file__).parent / "fixtures" / "jax_take_wrap_segment_mean_max_min.hlo"
    r = cli("rewrite", str(fixture), "--out", str(tmp_path / "out"), "--rewrite_all",
            "--verify")
    assert r.returncode == 0, r.stderr
    assert "3 reductions of one lookup into one call" in r.stdout + r.stderr
    assert "bitwise equal: True" in r.stdout + r.stderr
    (report,) = (tmp_path / "out").rglob("report.json")
    groups = json.loads(report.read_text())["groups"]
    assert [g["combiners"] for g in groups] == [["sum", "max", "min"]]
    assert "ember.multi_segment_reduce" in next((tmp_path / "out").rglob("rewritten.hlo")
                                                ).read_text()
