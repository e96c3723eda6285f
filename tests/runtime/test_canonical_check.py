"""The canonicalization check: each value a canonicalization replaced against its canonical
form, on XLA:CPU in the model. Exact over the library corpus and the training steps. A wrong
order rule (the masked bags of 20-24 rows that became a segment sum added row after row, before
the rule was measured per loop) is named with the difference, and ``rewrite --verify`` fails
and writes nothing, though the model's outputs are within the tolerance and the call equals
its outlined computation."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from helper_modules import load_helper

from ember_xla.hlo.printer import print_module
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.native import padded_order
from ember_xla.orchestrate.rewrite_model import ModelFailed, rewrite_one
from ember_xla.rewrites.canonicalize.probe import canonical_probe
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.canonical_check import check_replacements, replacement_mismatch_line

lm = load_helper("rewrites/library_models.py")


def _training_models():
    for n in ("training_steps", "training_corpus", "training_flax", "training_jax",
              "training_keras", "training_idioms"):
        load_helper(f"rewrites/{n}.py")
    return load_helper("rewrites/training_models.py")


tm = _training_models()
CASES = [("lib", n) for n in sorted(lm.MODELS)] + [("train", n) for n in sorted(tm.STEPS)]


def _check(module, sets, assume_finite_tables=False):
    p = canonical_probe(module, assume_finite_tables)
    return p, check_replacements(p, sets)


#: canonical forms XLA:CPU computes otherwise than the original: the one-hot product of
#: ``--assume_finite_tables`` times a scale, which XLA folds into the dot's one-hot operand
#: (products rounded, then added) while the gathered rows are scaled inside the sum's loop
#: (fused multiply-adds); the bag stays in XLA, so nothing of it reaches the output
#: (``rewrite_module`` returns the original module when no cluster is rewritten)
INEXACT = {"tf_one_hot_einsum_scaled_bag_sum": "Sum.9"}


@pytest.mark.parametrize("corpus,name", CASES)
def test_corpus_canonical_forms_equal_xla(corpus, name):
    if corpus == "lib":
        module, finite = lm.export(name).module, lm.MODELS[name].assume_finite_tables
        sets = {c: lm.inputs(name, c) for c in ("random", "edge")}
    else:
        module, finite = tm.export(name)[0].module, False
        sets = {c: tm.inputs(name, c) for c in ("random", "edge")}
    _, check = _check(module, sets, finite)
    if name in INEXACT:
        assert [r["instruction"] for r in check["mismatches"]] == [INEXACT[name]]
        result = rewrite_module(module, cost_model=False, assume_finite_tables=finite)
        assert not result.clusters and result.module is module
        return
    assert check["exact"], check["mismatches"]


def _masked_bag(p):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((1000, 4)).astype(np.float32),
            rng.integers(0, 1000, (4, p)).astype(np.int32), rng.random((4, p)) < 0.7]
    return from_jax(lambda t, i, m: jnp.where(m[..., None], t[i], 0).sum(1), *args), args


def test_probe_returns_the_model_then_each_replacement():
    model, args = _masked_bag(10)
    before = print_module(model.module)
    p, check = _check(model.module, {"a": args})
    assert print_module(model.module) == before  # the model is left as it was
    bag = [r for r in p.replacements if r.opcode == "reduce"]
    assert bag and bag[0].canonical == "scatter"  # masked-bag-to-segments
    for probe in (p.original, p.canonical):
        assert len(probe.entry.root.operands) == p.model_arrays + sum(
            r.arrays for r in p.replacements)
    assert check["exact"] and check["checked"] == len(p.replacements)


def test_a_wrong_order_rule_is_named(monkeypatch):
    monkeypatch.setitem(padded_order.SEQUENTIAL_MAX_WIDTH, ("f32", "s32", "mask"), 24)
    model, args = _masked_bag(22)
    _, check = _check(model.module, {"in_range": args})
    assert not check["exact"]
    line = replacement_mismatch_line(check)
    assert line.startswith("the canonicalization changed the values of ")
    assert "(reduce, made a scatter)" in line and "in range ids" in line


def test_rewrite_verify_checks_the_canonical_forms_it_writes(tmp_path):
    model, _ = _masked_bag(10)
    report, _ = rewrite_one(model, str(tmp_path / "out"), True, 0, say=lambda *a: None,
                            cost_model=False)
    check = report["verify"]["canonical"]
    assert report["clusters"] and check["exact"] and check["checked"] >= 1


def test_rewrite_verify_fails_on_a_wrong_canonical_form(monkeypatch, tmp_path):
    model, _ = _masked_bag(22)
    out = tmp_path / "out"
    report, _ = rewrite_one(model, str(out), True, 0, say=lambda *a: None, cost_model=False)
    assert out.exists() and not report["clusters"]  # the rule as it is: kept in XLA
    monkeypatch.setitem(padded_order.SEQUENTIAL_MAX_WIDTH, ("f32", "s32", "mask"), 24)
    out = tmp_path / "wrong"
    with pytest.raises(ModelFailed, match="the canonicalization changed the values of"):
        rewrite_one(model, str(out), True, 0, say=lambda *a: None, cost_model=False)
    assert not out.exists()
