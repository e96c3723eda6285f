"""The capturing copy of a rewritten module (``emulator/capture.py``): operands that are entry
parameters (the tables) stay out of the returned tuple and come from the run's inputs; computed
operands and every result are returned; the split equals what XLA:CPU computes."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from ember_xla.emulator.capture import CAPTURED, capture, capture_module, split_captured
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.orchestrate.rewrite_model import rewrite_for

ROWS, D, B, P = 50, 8, 6, 3


def _model():
    def f(t, i, w):
        return (jnp.take(t, i, axis=0) * (w * 2.0)[:, :, None]).sum(1) + 1.0

    rng = np.random.default_rng(3)
    inputs = [
        rng.standard_normal((ROWS, D)).astype(np.float32),
        rng.integers(0, ROWS, (B, P)).astype(np.int32),
        rng.standard_normal((B, P)).astype(np.float32),
    ]
    return rewrite_for(from_jax(f, *inputs).module, "dae").module, inputs


def test_parameters_are_not_returned_and_come_from_the_inputs():
    from ember_xla.runtime.execute import run_module

    rewritten, inputs = _model()
    m, n_own, layout = capture_module(rewritten)
    ((name, sources, n_out),) = layout
    params = [p for p in sources if p != CAPTURED]
    assert 0 in params  # the table is parameter 0, not returned
    flat = run_module(m, inputs)
    n_captured = sum(p == CAPTURED for p in sources)
    assert len(flat) == n_own + n_captured + n_out
    assert all(x.nbytes != inputs[0].nbytes for x in flat[n_own:])  # no copy of the table
    cap = capture(rewritten, inputs)
    ops = cap.operands[name]
    assert len(ops) == len(sources)
    for p, x in zip(sources, ops, strict=True):
        if p != CAPTURED:
            assert x.tobytes() == inputs[p].tobytes() and x.dtype == inputs[p].dtype
    assert cap.outputs[0].tobytes() == run_module(rewritten, inputs)[0].tobytes()
    assert len(cap.results[name]) == n_out


def test_split_without_the_inputs_is_a_clear_error():
    from ember_xla.runtime.execute import run_module

    rewritten, inputs = _model()
    m, n_own, layout = capture_module(rewritten)
    with pytest.raises(ValueError, match="is parameter 0, and the run's inputs were not given"):
        split_captured(run_module(m, inputs), n_own, layout)


def test_results_only():
    rewritten, inputs = _model()
    _, _, layout = capture_module(rewritten, operands=False)
    assert [(s, n) for _, s, n in layout] == [((), 1)]
