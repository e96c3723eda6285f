"""XLA:CPU folds ``A + scatter-add(0, ids, rows)`` into ``scatter-add(A, ids, rows)`` (each row
added onto A one by one, in index order): a segment sum whose only user adds it to a dense
value -- a GNN's residual ``h + segment_sum(msgs, dst)``, GIN's ``(1 + eps) * h + ...`` -- is
rewritten as ``ember.ordered_scatter(A, ids, rows)`` and the module stays bit-identical to
XLA:CPU (duplicate receivers, -0/Inf/NaN rows, ids out of range on both sides). Where XLA
combines the scatters otherwise (two small ones concatenated, a sum added again) or the
kernel's type is not the scatter's (bf16), the scatter stays in XLA with the reason; two
large sums added together, which XLA leaves apart, and a segment max are still rewritten."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import training_steps as ts

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.patterns import DAE_PATTERNS
from ember_xla.rewrites.pipeline import rewrite_module

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

N, D, L, S = 300, 16, 4000, 200


def graph(seed: int, n_msgs: int = L):
    """Messages with -0.0, Inf and NaN rows; sorted receivers (~20 per node) with ids past
    either end (jax.ops.segment_sum drops them, as XLA's scatter does)."""
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((N, D)).astype(np.float32)
    t[::9] = -0.0
    t[5, 3], t[7, 1], t[11, :] = np.inf, -np.inf, np.nan
    ids = rng.integers(0, N, n_msgs).astype(np.int32)
    seg = rng.integers(0, S, n_msgs)
    seg[:6] = [-1, S, -S, S + 5, 0, S - 1]
    seg = np.sort(seg).astype(np.int32)
    h = rng.standard_normal((S, D)).astype(np.float32)
    h[::5] = -0.0
    return t, ids, seg, h


FOLDED = {
    "residual": lambda t, ids, seg, h: h + jax.ops.segment_sum(t[ids], seg, S),
    "residual_left": lambda t, ids, seg, h: jax.ops.segment_sum(t[ids], seg, S) + h,
    "gin": lambda t, ids, seg, h: 1.1 * h + jax.ops.segment_sum(t[ids], seg, S),
    "unsorted": lambda t, ids, seg, h: h + jax.ops.segment_sum(t[ids], seg[::-1], S),
    "weighted": lambda t, ids, seg, h: h + jax.ops.segment_sum(
        t[ids] * jnp.cos(ids.astype(jnp.float32))[:, None], seg, S),
}


def kinds(r) -> list[str]:
    return sorted(c["kind"] for c in r.clusters)


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_sum_added_to_a_dense_value_is_an_ordered_scatter(name):
    r = ts.check_step(FOLDED[name], *graph(1), cost_model=False)
    assert kinds(r) == ["ordered_scatter"]
    (c,) = r.clusters
    assert c["pass"] == "forward" and c["attributes"] == {"combiner": "add"}
    assert c["output"].startswith(f"f32[{S},{D}]")


def test_intermediate_operand_is_updated_in_place():
    r = ts.check_step(FOLDED["gin"], *graph(2), cost_model=False)
    (cc,) = [op for op in r.module.entry.ops if op.opcode == "custom-call"]
    assert cc.operands[0].owner.opcode == "multiply"  # (1 + eps) * h, computed by XLA
    assert cc.attributes.get("output_operand_aliasing")


def test_entry_parameter_operand_is_copied():
    r = ts.check_step(FOLDED["residual"], *graph(2), cost_model=False)
    (cc,) = [op for op in r.module.entry.ops if op.opcode == "custom-call"]
    assert cc.operands[0].owner.opcode == "parameter"
    assert not cc.attributes.get("output_operand_aliasing")


def test_two_large_sums_added_are_rewritten():
    # XLA concatenates two scatters added together only when their updates are fewer
    # elements than the result: 2 x L x D > S x D, so both stay sums from 0
    def f(t, ids, seg, h):
        return (jax.ops.segment_sum(t[ids], seg, S)
                + jax.ops.segment_sum(t[ids[::-1]], seg, S)) * h

    r = ts.check_step(f, *graph(2), cost_model=False)
    assert kinds(r) in (["segment_reduce", "segment_reduce"], ["grouped_segment_reduce"])


def test_two_small_sums_added_stay_in_xla():
    # 2 x 40 x D < S x D: XLA concatenates both into one scatter from 0
    def f(t, ids, seg, h):
        return (jax.ops.segment_sum(t[ids], seg, S)
                + jax.ops.segment_sum(t[ids[::-1]], seg, S)) * h

    r = ts.check_step(f, *graph(4, n_msgs=40), cost_model=False)
    assert not r.clusters
    assert any("concatenates" in n["reason"] for n in r.near_misses), r.near_misses


def test_residual_of_two_sums():
    # (h + s1) + s2: s1 folds onto h; the outer add then sees two scatters too large to
    # concatenate and leaves s2 a sum from 0
    def f(t, ids, seg, h):
        return (h + jax.ops.segment_sum(t[ids], seg, S)
                + jax.ops.segment_sum(t[ids[::-1]], seg, S))

    r = ts.check_step(f, *graph(5), cost_model=False)
    assert kinds(r) == ["ordered_scatter", "segment_reduce"]


def test_sum_added_again_stays_in_xla():
    # (h + s) + b: XLA folds b into the same scatter's operand (h + b), not A = h
    def f(t, ids, seg, h):
        return h + jax.ops.segment_sum(t[ids], seg, S) + jnp.sin(h)

    r = ts.check_step(f, *graph(6), cost_model=False)
    assert "ordered_scatter" not in kinds(r) and "segment_reduce" not in kinds(r)
    assert any("added again" in n["reason"] for n in r.near_misses), r.near_misses


def test_bf16_stays_in_xla():
    t, ids, seg, h = graph(7)
    r = ts.check_step(FOLDED["residual"], t.astype(jnp.bfloat16), ids, seg,
                      h.astype(jnp.bfloat16), cost_model=False)
    assert not r.clusters
    assert any("f32 only" in n["reason"] for n in r.near_misses), r.near_misses


def test_dae_patterns_take_the_fold():
    # the DAE machines lower it as the ordered scatter (tests/emulator/test_kinds_on_targets.py)
    m = from_jax(FOLDED["residual"], *graph(8)).module
    r = rewrite_module(m, patterns=DAE_PATTERNS, cost_model=False)
    assert [(c["kind"], c["pass"]) for c in r.clusters] == [("ordered_scatter", "forward")]


def test_segment_max_plus_residual_is_rewritten():
    def f(t, ids, seg, h):
        return h + jax.ops.segment_max(t[ids], seg, S)

    r = ts.check_step(f, *graph(3), cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["segment_reduce"]


def test_cost_model_keeps_the_fold_in_xla():
    # XLA's fold is its own serial scatter onto A: never slower means it stays there
    r = ts.check_step(FOLDED["gin"], *graph(9), cost_model=True)
    assert not r.clusters
    kept = [n for n in r.near_misses if n.get("kept_in_xla")]
    assert len(kept) == 1 and "its own serial scatter onto A" in kept[0]["reason"]


def test_two_lookups_of_a_large_table_stay_in_xla():
    # a two-tower model sharing a table: g = scatter(q) + scatter(i), with 2 x 24 x D update
    # elements < V x D, which XLA concatenates into one scatter from 0 (rewriting each
    # gradient as a sum from 0 gives other bits)
    rng = np.random.default_rng(3)
    t = (rng.standard_normal((1000, 8)) * 0.5).astype(np.float32)
    q, i = (rng.integers(0, 20, (4, 6)).astype(np.int32) for _ in range(2))
    y = rng.standard_normal(4).astype(np.float32)

    def loss(t, q, i, y):
        u, v = t[q].sum(1), jnp.take(t, i, axis=0).mean(1)
        return ((jnp.sum(u * v, axis=1) - y) ** 2).mean()

    r = ts.check_step(ts.sgd_step(loss, 0.1), t, q, i, y, cost_model=False)
    assert not ts.backward(r)
    misses = [n for n in r.near_misses if n.get("pass") == "backward"]
    assert len(misses) == 2 and all("concatenates" in n["reason"] for n in misses), misses
