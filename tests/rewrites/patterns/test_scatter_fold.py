"""patterns/scatter_fold.py's replay of XLA:CPU's ``HandleAdd`` on exported JAX functions: the
fold of ``A + scatter-add(0, ids, rows)`` (either side) gives A, two small scatters added give
the concatenation reason, two large ones no fold, a scatter not added to anything no fold. The
rewritten results are compared with XLA:CPU in tests/rewrites/test_scatter_add_fold.py."""

from __future__ import annotations

import jax
import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.canonicalize import canonicalize
from ember_xla.rewrites.patterns.scatter_fold import Fold, fold_decision

N, D, S = 50, 4, 30


def decisions(fn, n_msgs: int) -> list:
    rng = np.random.default_rng(0)
    t = rng.standard_normal((N, D)).astype(np.float32)
    ids = rng.integers(0, N, n_msgs).astype(np.int32)
    seg = rng.integers(0, S, n_msgs).astype(np.int32)
    h = rng.standard_normal((S, D)).astype(np.float32)
    m = from_jax(fn, t, ids, seg, h).module
    canonicalize(m)
    return [fold_decision(op) for op in m.entry.ops if op.opcode == "scatter"]


def test_residual_either_side_folds_onto_h():
    for fn in (lambda t, ids, seg, h: h + jax.ops.segment_sum(t[ids], seg, S),
               lambda t, ids, seg, h: jax.ops.segment_sum(t[ids], seg, S) + h):
        (d,) = decisions(fn, 200)
        assert isinstance(d, Fold) and d.other.owner.opcode == "parameter"


def test_two_sums_added():
    def f(t, ids, seg, h):
        return (jax.ops.segment_sum(t[ids], seg, S)
                + jax.ops.segment_sum(t[ids[::-1]], seg, S)) * h

    small = decisions(f, 5)  # 2 x 5 x D < S x D: concatenated
    assert len(small) == 2 and all("concatenates" in d for d in small)
    assert decisions(f, 200) == [None, None]  # 2 x 200 x D > S x D: left apart


def test_sum_not_added_is_not_folded():
    assert decisions(lambda t, ids, seg, h: jax.ops.segment_sum(t[ids], seg, S) * h,
                     200) == [None]
