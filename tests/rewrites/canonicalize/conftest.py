"""``canon``: import a JAX function (or HLO text), run a canonicalization pipeline on a copy,
verify it, and check that the copy computes bitwise what the original does on XLA:CPU for the
given inputs (canonicalization is pure HLO -> HLO: no kernels involved). ``canon.opcodes``
lists the entry opcodes, ``canon.table`` makes a random f32 table."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def canon():
    from ember_xla.hlo.parser import parse_module
    from ember_xla.hlo.verifier import verify_module
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.ir.passes import PassPipeline
    from ember_xla.rewrites.canonicalize.notes import collecting
    from ember_xla.runtime.execute import run_module

    def run(fn, args, pipeline, inputs=()):
        m = parse_module(fn) if isinstance(fn, str) else from_jax(fn, *args).module
        work = m.clone()
        with collecting() as notes:
            PassPipeline.from_spec(pipeline).apply(work)
        verify_module(work)
        for xs in [args, *inputs]:
            for a, b in zip(run_module(work, xs), run_module(m, xs), strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape
                assert a.tobytes() == b.tobytes(), (pipeline, a, b)
        return work, notes

    run.opcodes = lambda module: [op.opcode for op in module.entry.ops]
    run.table = lambda n=10, d=4, seed=0: np.random.default_rng(seed).standard_normal(
        (n, d)).astype(np.float32)
    return run
