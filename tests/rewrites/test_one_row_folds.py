"""A scatter-add of exactly one row into zeros: XLA:CPU folds it into a copy of the row, so a
-0.0 stays -0.0 (a kernel adding the row to +0.0 gives +0.0). Such a segment sum and such a
lookup's gradient stay in XLA with that reason; two rows are rewritten, bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from training_steps import same_bits

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)

ROW = np.array([1.0, -0.0, 2.0, -0.0, 0.0, -1.0, -0.0, 3.0], np.float32)
TABLE = np.tile(ROW, (6, 1))


def _reasons(r) -> str:
    return " ".join(str(n.get("reason", "")) for n in r.near_misses)


def _check(fn, args, rewritten: bool):
    m = from_jax(fn, *args).module
    r = rewrite_module(m, cost_model=False)
    if rewritten:
        assert r.clusters, r.near_misses
    else:
        assert not r.clusters and "one row to zeros" in _reasons(r), r.near_misses
    for opts in (None, {"xla_allow_excess_precision": False}):
        for a, b in zip(run_module(m, args, opts), run_module(r.module, args, opts), strict=True):
            assert same_bits(a, b), (a, b)


@pytest.mark.parametrize("n", [1, 2])
def test_segment_sum(n):
    ids = np.array([2, 4][:n], np.int32)
    seg = np.zeros(n, np.int32)

    def fn(t, ids, seg):
        return jax.ops.segment_sum(jnp.take(t, ids, axis=0), seg, num_segments=2)

    _check(fn, [TABLE, ids, seg], rewritten=n > 1)


@pytest.mark.parametrize("n", [1, 2])
def test_lookup_gradient(n):
    ids = np.array([2, 4][:n], np.int32)
    cot = np.tile(ROW, (n, 1))

    def fn(t, ids, cot):
        return jax.value_and_grad(lambda t: jnp.sum(jnp.take(t, ids, axis=0) * cot))(t)

    _check(fn, [TABLE, ids, cot], rewritten=n > 1)
