"""XLA:CPU folds ``A + scatter-add(0, ids, rows)`` into ``scatter-add(A, ids, rows)`` (each row
added onto A one by one): a segment sum whose only user adds it to a dense value -- a GNN's
residual ``h + segment_sum(msgs, dst)``, GIN's ``(1 + eps) * h + ...`` -- stays in XLA with
that reason, and the module stays bit-identical to XLA:CPU; two segment sums added together,
which XLA does not fold, and a segment max are still rewritten."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import training_steps as ts

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

N, D, L, S = 300, 16, 4000, 200


def graph(seed: int):
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((N, D)).astype(np.float32)
    t[::9] = -0.0
    ids = rng.integers(0, N, L).astype(np.int32)
    seg = np.sort(rng.integers(0, S, L)).astype(np.int32)
    h = rng.standard_normal((S, D)).astype(np.float32)
    h[::5] = -0.0
    return t, ids, seg, h


FOLDED = {
    "residual": lambda t, ids, seg, h: h + jax.ops.segment_sum(t[ids], seg, S),
    "residual_left": lambda t, ids, seg, h: jax.ops.segment_sum(t[ids], seg, S) + h,
    "gin": lambda t, ids, seg, h: 1.1 * h + jax.ops.segment_sum(t[ids], seg, S),
    "unsorted": lambda t, ids, seg, h: h + jax.ops.segment_sum(t[ids], seg[::-1], S),
}


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_sum_added_to_a_dense_value_stays_in_xla(name):
    r = ts.check_step(FOLDED[name], *graph(1), cost_model=False)
    assert not r.clusters
    assert any("folds A + scatter-add(0" in n["reason"] for n in r.near_misses), r.near_misses


def test_two_sums_added_are_rewritten():
    def f(t, ids, seg, h):
        return (jax.ops.segment_sum(t[ids], seg, S)
                + jax.ops.segment_sum(t[ids[::-1]], seg, S)) * h

    r = ts.check_step(f, *graph(2), cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["segment_reduce", "segment_reduce"] or \
        [c["kind"] for c in r.clusters] == ["grouped_segment_reduce"]


def test_segment_max_plus_residual_is_rewritten():
    def f(t, ids, seg, h):
        return h + jax.ops.segment_max(t[ids], seg, S)

    r = ts.check_step(f, *graph(3), cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["segment_reduce"]
