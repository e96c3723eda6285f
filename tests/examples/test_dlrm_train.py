"""The built-in example's training step (ember_xla.examples.dlrm.jax_train_step, what
``ember-xla example`` rewrites second): every table's forward bag and its backward with the SGD
update fused are rewritten, and the rewritten step is bit-equal to the original on XLA:CPU
(loss and every updated parameter), with excess precision allowed and not, on in-range ids
and on ids that are negative or past the end (jnp.take's fill mode)."""

from __future__ import annotations

import pytest

from ember_xla.examples import dlrm
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

native = pytest.importorskip("ember_xla.native")
try:
    native.register_targets()
except native.NativeLibraryMissing as err:  # pragma: no cover - depends on the install
    pytest.skip(str(err), allow_module_level=True)


def test_training_example_is_rewritten_and_equal():
    params, batch = dlrm.make_params(), dlrm.make_batch(batch=64)
    args = dlrm.train_args(params, batch, dlrm.make_labels(batch=64))
    m = from_jax(dlrm.jax_train_entry, *args).module
    r = rewrite_module(m, cost_model=False)
    n = len(dlrm.ROWS)
    assert sorted(c["pass"] for c in r.clusters) == ["backward"] * n + ["forward"] * n
    assert [c.get("optimizer") for c in r.clusters if c["pass"] == "backward"] == ["sgd"] * n
    bad = list(args)
    k = len(dlrm.ROWS) + 3
    bad[k] = bad[k].copy()
    bad[k][:3] = [-1, dlrm.ROWS[0], -dlrm.ROWS[0] - 5]           # table 0's ids out of range
    for xs in (args, bad):
        for excess in (True, False):
            opts = {"xla_allow_excess_precision": excess}
            want, got = run_module(m, xs, opts), run_module(r.module, xs, opts)
            assert len(got) == len(want) == 1 + n + 2          # loss, tables, bot, top
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
