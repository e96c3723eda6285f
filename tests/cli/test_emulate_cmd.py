"""``ember-xla emulate`` through the installed console script: the built-in example and the
test-corpus models with clusters emulated and verified; --json; --trace; bad target files and
programs that do not fit: one line, exit 2. Cost: ~40 s (one example run per level, the
corpus case, error paths)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]


def _export_example(path: Path, batch: int) -> str:
    from ember_xla.examples import dlrm
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.hlo_import.proto import module_to_proto

    args = dlrm.flat_args(dlrm.make_params(), dlrm.make_batch(batch=batch))
    path.write_bytes(module_to_proto(from_jax(dlrm.jax_entry, *args).module))
    return str(path)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return _export_example(tmp_path_factory.mktemp("ex") / "dlrm_b4.pb", 4)


@pytest.fixture(scope="module")
def corpus_case(tmp_path_factory):
    """The cluster-bearing case of tests/hlo_import/corpus.py, as a .pb."""
    sys.path.insert(0, str(TESTS / "hlo_import"))
    import corpus

    proto, _, _ = corpus.build("jax_embedding_bag")
    p = tmp_path_factory.mktemp("corpus") / "jax_embedding_bag.pb"
    p.write_bytes(proto)
    return str(p)


def one_error_line(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember-xla: error: "), p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    return lines[0]


@pytest.mark.parametrize("level", ["-O0", "-O3"])
def test_example_emulated_and_verified(cli, example, level, tmp_path):
    from ember_xla.examples import dlrm

    trace = tmp_path / "t.json"
    p = cli("emulate", example, level, "--json", "--trace", str(trace))
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    # the example's independent tables are one grouped call by default (--nogroup_tables: one
    # call per table, as test_nogroup_gives_one_cluster_per_table checks)
    (call,) = rep["clusters"]
    assert rep["total_cycles"] > 0 and call["kind"] == "ember.grouped_segment_reduce"
    assert len(dlrm.ROWS) > 1
    assert rep["total_cycles"] == pytest.approx(sum(c["cycles"] for c in rep["clusters"]))
    assert rep["verify"]["ok"] and rep["level"] == level[1:]
    assert "bit for bit" in p.stderr
    data = json.loads(trace.read_text())
    assert data["traceEvents"] and data["otherData"]["total_cycles"] == pytest.approx(
        rep["total_cycles"])


def test_nogroup_gives_one_cluster_per_table(cli, example):
    from ember_xla.examples import dlrm

    p = cli("emulate", example, "--json", "--nogroup_tables")
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    assert len(rep["clusters"]) == len(dlrm.ROWS) and rep["verify"]["ok"]


def test_table_output_and_corpus_model(cli, corpus_case):
    p = cli("emulate", corpus_case, "--target=tmu")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "-O3 on tmu" in p.stdout and "total" in p.stdout and "bound" in p.stdout


def test_bad_target_file_is_one_line(cli, example, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((Path(__file__).parents[2] / "configs" / "tiny.toml").read_text()
                   .replace("lanes = 2", "lanes = \"two\""))
    line = one_error_line(cli("emulate", example, f"--target={bad}"))
    assert "bad.toml: access_unit.lanes: expected an integer" in line
    line = one_error_line(cli("emulate", example, "--target=nosuch"))
    assert "nosuch" in line


def test_program_that_does_not_fit_tiny_is_one_line(cli, example):
    # -O3's callbacks use 8 x f32 = 256-bit vectors; tiny's execute unit has 128-bit ones
    line = one_error_line(cli("emulate", example, "--target=tiny", "-O3"))
    assert "does not fit target tiny" in line and "cluster 0" in line


FIXTURES = TESTS / "rewrites" / "fixtures"
SAMPLED_IDIOMS = ("jax_take_fill_segment_sum_bf16", "tf_gather_weighted_unsorted_segment_sum")


def _idiom(cli, name: str, tmp_path: Path) -> None:
    """An idiom of tests/rewrites/idiom_models.py (via its fixture) emulated and verified."""
    from ember_xla.hlo_import.load import load_model
    from ember_xla.rewrites.pipeline import rewrite_module

    model = FIXTURES / f"{name}.hlo"
    if "{...}" in model.read_text():  # the fixture text elides a constant: export the proto
        sys.path.insert(0, str(TESTS / "rewrites"))
        import idiom_models

        proto, _ = idiom_models.hlo(name)
        model = tmp_path / f"{name}.pb"
        model.write_bytes(proto)
    result = rewrite_module(load_model(str(model)).module, cost_model=False)
    if not result.clusters:
        reasons = "; ".join(n["reason"] for n in result.near_misses)[:300]
        pytest.skip(f"{name}: the rewrite makes no cluster (near-misses: {reasons})")
    p = cli("emulate", str(model), "-O3", "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    assert rep["verify"]["ok"] and len(rep["clusters"]) == len(result.clusters)
    assert all(c["emulated"] and c["cycles"] > 0 for c in rep["clusters"])


@pytest.mark.parametrize("name", SAMPLED_IDIOMS)
def test_idiom_models_sampled(cli, name, tmp_path):
    _idiom(cli, name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.hlo")))
def test_idiom_models_all(cli, name, tmp_path):
    _idiom(cli, name, tmp_path)


@pytest.mark.slow
def test_example_as_shipped(cli, tmp_path):
    from ember_xla.examples import dlrm

    model = _export_example(tmp_path / "dlrm.pb", dlrm.BATCH)
    p = cli("emulate", model, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    assert rep["verify"]["ok"] and len(rep["clusters"]) == len(dlrm.ROWS)


def test_example_placed_on_npu(cli, example, tmp_path):
    """``--target=npu --placement``: the plan, per-core times, verified outputs; the saved plan
    reloads to the same makespan; ``--plot`` writes the per-core load PNG."""
    plot, plan = tmp_path / "load.png", tmp_path / "plan.json"
    p = cli("emulate", example, "--target=npu", "--placement=greedy", "--plot", str(plot),
            "--save_plan", str(plan), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    assert rep["verify"]["ok"] and rep["policy"] == "greedy" and rep["total_cycles"] > 0
    assert all(c["equal"] for c in rep["verify"]["clusters_vs_native"])
    assert len(rep["cores"]) == 8 and {b["policy"] for b in rep["baselines"]} == {"symmetric"}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = cli("emulate", example, "--target=npu", f"--placement={plan}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{rep['makespan_cycles']:,.0f} cycles" in again.stdout
    assert "equal the native kernels bit for bit" in again.stderr


def test_placement_needs_a_multi_core_target(cli, example, tmp_path):
    line = one_error_line(cli("emulate", example, "--target=tmu", "--placement=auto"))
    assert "--placement: tmu" in line and "has one core" in line and "--target=tmu8" in line
    line = one_error_line(cli("emulate", example, "--plot", str(tmp_path / "x.png")))
    assert "--plot: only with a multi-core target (--target=tmu8 or --target=npu" in line
    assert not (tmp_path / "x.png").exists()
    line = one_error_line(cli("emulate", example, "--target=npu", "--placement=nosuch"))
    assert "--placement=nosuch: expected auto" in line
