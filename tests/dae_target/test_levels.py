"""The named levels -O0..-O4: their pipelines parse, ``lower_cluster`` records every stage, and
for clusters of every kind (from real JAX functions, ``pass_cases``) the final DLC program
equals the SLC program bit for bit and the cluster's native kernel on XLA:CPU, on random inputs
and on every edge case of ``check.EDGE_CASES``."""

from __future__ import annotations

import pytest
from pass_cases import CASES, equivalent, lowered

import ember_xla.dae_target.passes  # noqa: F401  (registers the passes)
from ember_xla.dae_target.check import check_spec, summary
from ember_xla.dae_target.passes.levels import LEVELS, level_pipeline, lower_cluster, run_stages
from ember_xla.ir.parser import parse_module
from ember_xla.ir.passes import PipelineError, parse_pipeline
from ember_xla.ir.printer import print_module


def test_level_pipelines():
    assert sorted(LEVELS) == [0, 1, 2, 3, 4]
    names = [[p.name for p in parse_pipeline(LEVELS[k])] for k in range(5)]
    assert names[0] == ["decouple"]
    for lo, hi in zip(names, names[1:], strict=False):  # each level adds to the one before
        assert set(lo) < set(hi) and hi[-1] == "decouple"
    assert names[3] == ["vectorize", "bufferize", "queue-align", "simplify-mem", "decouple"]
    assert {"dedup", "hoist"} <= set(names[4])
    assert level_pipeline("-O2") == level_pipeline("O2") == level_pipeline(2) == LEVELS[2]
    assert level_pipeline("bufferize") == "bufferize"


def test_bad_pipeline_fails_before_lowering():
    _, spec = lowered("offsets_sum_fill_wrap")
    with pytest.raises(PipelineError, match="unknown pass"):
        lower_cluster(spec, "vectorize,no-such-pass")


def _dlc_only(m) -> bool:
    codes = {op.opcode for op in m.walk()}
    return "dlc.compute_loop" in codes and not codes & {"slc.for", "slcv.for", "slc.callback"}


@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_level_is_exact(case, level):
    slc, spec = lowered(case)
    stages = lower_cluster(spec, level)
    assert [n for n, _ in stages] == ["slc"] + [p.name for p in parse_pipeline(LEVELS[level])]
    assert print_module(stages[0][1]) == print_module(slc)
    for _, m in stages:
        text = print_module(m)
        assert print_module(parse_module(text)) == text
    final = stages[-1][1]
    assert _dlc_only(final), print_module(final)
    equivalent(slc, final, spec, rounds=1, seed=level)
    if level in (0, 3):
        res = check_spec(spec, final, rounds=1, seed=level)
        assert res.ok, summary(res)


def test_run_stages_keeps_copies_and_reports():
    slc, _ = lowered("padded_sum_weighted")
    before = print_module(slc)
    stages = run_stages(slc, 3)
    assert print_module(slc) == before  # the input is not touched
    texts = [print_module(m) for _, m, _ in stages]
    assert len(set(texts)) == len(texts)  # every pass of -O3 changes this cluster
    assert all(r for _, _, r in stages), [str(r) for _, _, r in stages]
