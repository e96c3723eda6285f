"""No silent misses, over the whole corpus (the idiom zoo, the real-library models and the
import corpus of JAX/TF modules, optimized ones included): every row gather whose values reach
a reduction (found independently here, after the same canonicalization the rewrite runs) is
in a cluster or named by a near-miss with a reason; and in the idiom zoo and the library
corpus that reason comes from a pattern or a canonicalization pass, not from the generic
coverage audit. One-hot lookups count too: a one-hot dot left in place must be reported."""

from __future__ import annotations

import sys

import pytest
from helper_modules import load_helper

from ember_xla.hlo_import.proto import module_from_proto
from ember_xla.rewrites.canonicalize import canonicalize
from ember_xla.rewrites.coverage import lookup_reductions
from ember_xla.rewrites.pipeline import rewrite_module

im = sys.modules["idiom_models"]       # loaded by conftest.py
lm = sys.modules["library_models"]


def _import_corpus():
    # the same module object tests/hlo_import uses
    return load_helper("hlo_import/corpus.py", "tests_hlo_import_corpus")


def _one_hot_dots(module) -> list[str]:
    from ember_xla.rewrites.canonicalize.onehot_dot import _one_hot_compare, multi_hot

    return [op.name for op in module.walk() if op.opcode == "dot" and (
        _one_hot_compare(op.operands[0]) is not None or multi_hot(op.operands[0]) is not None)]


def check(module, finite: bool = False) -> list[dict]:
    result = rewrite_module(module, assume_finite_tables=finite)
    work = module.clone()
    canonicalize(work, assume_finite_tables=finite)
    covered = {c["location"]["instruction"] for c in result.clusters}
    named = {n["location"]["instruction"]: n for n in result.near_misses}
    silent = [f"{g.name} -> {r.opcode} {r.name}" for g, r in lookup_reductions(work)
              if r.name not in covered and r.name not in named]
    silent += [f"one-hot dot {d}" for d in _one_hot_dots(work) if d not in named]
    assert not silent, f"silent misses: {silent}"
    assert all(n["reason"] for n in result.near_misses)
    return result.near_misses


@pytest.mark.parametrize("name", [i.name for i in im.IDIOMS])
def test_idiom_zoo(name):
    misses = check(module_from_proto(im.hlo(name)[0], name))
    assert not [m for m in misses if m["pattern"] == "coverage"], misses


@pytest.mark.parametrize("name", sorted(lm.MODELS))
@pytest.mark.parametrize("finite", [False, True])
def test_library_corpus(name, finite):
    misses = check(lm.export(name).module, finite)
    assert not [m for m in misses if m["pattern"] == "coverage"], misses


def test_import_corpus():
    corpus = _import_corpus()
    audited = 0
    for case in corpus.CASES:
        proto = corpus.build(case.name)[0]
        check(module_from_proto(proto, case.name))
        audited += 1
    assert audited == len(corpus.CASES)


def test_gradient_rows_gathered_before_a_backward_cluster():
    """The transpose of GNN message passing: gradient rows gathered by receiver feed the
    scatter-add by sender, which is rewritten; the near-miss names only the gather left in
    XLA and does not claim that no pattern matched the scatter."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    n, e, d = 300, 900, 8
    snd = jnp.asarray(rng.integers(0, n, e), jnp.int32)
    rcv = jnp.asarray(np.sort(rng.integers(0, n, e)), jnp.int32)
    norm = jnp.asarray(rng.random(e), jnp.float32)

    def loss(x):
        agg = jax.ops.segment_sum(x[snd] * norm[:, None], rcv, num_segments=n)
        return jnp.sum(agg ** 2)

    def step(x):
        return x - 1e-3 * jax.grad(loss)(x)

    x = jnp.asarray(rng.normal(size=(n, d)), jnp.float32)
    proto = jax.jit(step).lower(x).compiler_ir("hlo").as_serialized_hlo_module_proto()
    misses = check(module_from_proto(proto, "gcn_step"))
    result = rewrite_module(module_from_proto(proto, "gcn_step"))
    backward = [c for c in result.clusters if c.get("pass") == "backward"]
    assert backward, result.clusters
    scatter = backward[0]["location"]["instruction"]
    about = [m for m in misses if m["location"]["instruction"] == scatter]
    assert about and all("takes the gathered rows as a computed operand" in m["reason"]
                         for m in about), about
