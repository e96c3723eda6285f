"""``ember-xla lower --verify`` at -O3 and -O0 through the installed console script (the ``cli``
fixture) on the built-in example (ember_xla/examples/dlrm.py) and on the test-corpus models
that have clusters: every idiom of tests/rewrites/idiom_models.py the rewrite turns into
clusters (the others are skipped, naming their near-misses) and the cluster-bearing case
of tests/hlo_import/corpus.py (``jax_embedding_bag``; the other corpus cases have none). Each
run must exit 0 with every cluster lowered (none refused), every printed level checked, and
lower.json recording the max difference per level.

Cost: the default run does the example (batch 4, both levels, checked at full size against the
outlined computations; batch 2048 at -O3, large clusters checked at a small size of the same
form), the corpus case and two idioms: ~60 s CPU. ``-m slow`` runs every idiom at both
levels (~6 min CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helper_modules import load_helper

TESTS = Path(__file__).parents[1]
FIXTURES = TESTS / "rewrites" / "fixtures"
SAMPLED_IDIOMS = ("jax_take_fill_segment_sum_bf16", "tf_gather_weighted_unsorted_segment_sum")


def idiom_models():
    return load_helper("rewrites/idiom_models.py")


def lower_verified(cli, model: str, level: str, out: Path) -> dict:
    p = cli("lower", model, level, "--verify", "--out", str(out))
    assert p.returncode == 0, p.stderr[-4000:]
    assert "max |diff|" in p.stderr and "MISMATCH" not in p.stderr
    rep = json.loads((out / "lower.json").read_text())
    assert rep["clusters"], f"{model}: no ember clusters"
    for c in rep["clusters"]:
        assert "refused" not in c, c
        levels = [v["level"] for v in c["verify"]]
        assert levels[0] == "SLC" and levels[-1] == "DLC", levels
        if level != "-O0":
            assert "SLCV" in levels, levels
        assert all(v["ok"] and v["cases"] >= 4 for v in c["verify"]), c["verify"]
    return rep


def _export_example(path: Path, batch: int) -> str:
    from ember_xla.examples import dlrm
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.hlo_import.proto import module_to_proto

    args = dlrm.flat_args(dlrm.make_params(), dlrm.make_batch(batch=batch))
    path.write_bytes(module_to_proto(from_jax(dlrm.jax_entry, *args).module))
    return str(path)


@pytest.fixture(scope="module")
def example_small(tmp_path_factory):
    return _export_example(tmp_path_factory.mktemp("ex") / "dlrm_b4.pb", 4)


@pytest.mark.parametrize("level", ["-O3", "-O0"])
def test_builtin_example_small_batch(cli, example_small, level, tmp_path):
    from ember_xla.examples import dlrm

    rep = lower_verified(cli, example_small, level, tmp_path / "out")
    # the tables are one grouped call by default (the tuple form: lower has no concat form)
    (call,) = rep["clusters"]
    assert call["target"] == "ember.grouped_segment_reduce"
    assert call["description"].count("f32[") == len(dlrm.ROWS)
    # small enough to be checked at full size against each outlined computation
    for c in rep["clusters"]:
        assert "verify_shrunk" not in c
        assert {v["reference"] for v in c["verify"]} == {"outlined"}
        assert all(v["bitwise"] for v in c["verify"])


def test_builtin_example_as_shipped(cli, tmp_path):
    """The example at the batch ``ember-xla example`` uses (2048): clusters too large for the
    reference interpreters are checked at a small size of the same form."""
    from ember_xla.examples import dlrm

    model = _export_example(tmp_path / "dlrm.pb", dlrm.BATCH)
    rep = lower_verified(cli, model, "-O3", tmp_path / "out")
    (call,) = rep["clusters"]  # one grouped call of every table
    assert call["description"].count("f32[") == len(dlrm.ROWS) and "verify_shrunk" in call


def test_corpus_embedding_bag(cli, tmp_path):
    corpus = load_helper("hlo_import/corpus.py", "tests_hlo_import_corpus")
    proto, _, _ = corpus.build("jax_embedding_bag")
    (tmp_path / "m.pb").write_bytes(proto)
    for level in ("-O3", "-O0"):
        lower_verified(cli, str(tmp_path / "m.pb"), level, tmp_path / level)


def _idiom_model(name: str, tmp_path: Path) -> str:
    f = FIXTURES / f"{name}.hlo"
    text = f.read_text()
    if "{...}" not in text:
        return str(f)
    proto, _ = idiom_models().hlo(name)  # fixture text elides a constant: export the proto
    (tmp_path / f"{name}.pb").write_bytes(proto)
    return str(tmp_path / f"{name}.pb")


def _check_idiom(cli, name: str, tmp_path: Path) -> None:
    from ember_xla.hlo_import.load import load_model
    from ember_xla.rewrites.pipeline import rewrite_module

    model = _idiom_model(name, tmp_path)
    result = rewrite_module(load_model(model).module)
    if not result.clusters:  # only models with clusters are lowered
        reasons = "; ".join(n["reason"] for n in result.near_misses)[:300]
        pytest.skip(f"{name}: the rewrite makes no cluster (near-misses: {reasons})")
    for level in ("-O3", "-O0"):
        rep = lower_verified(cli, model, level, tmp_path / level)
        assert len(rep["clusters"]) == len(result.clusters)


@pytest.mark.parametrize("name", SAMPLED_IDIOMS)
def test_idiom_models_sampled(cli, name, tmp_path):
    _check_idiom(cli, name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.hlo")))
def test_idiom_models_all(cli, name, tmp_path):
    _check_idiom(cli, name, tmp_path)
