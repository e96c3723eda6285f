"""Canonicalization changes no bit of a whole model, clustered or not: every library-corpus
model and training step, canonicalized only (no cluster outlined), equals the original on
XLA:CPU for edge inputs under both ``xla_allow_excess_precision`` settings. (A regrouped bag
left in XLA must not change how XLA:CPU merges or fuses it with the ops around it; the
model-level verify tolerance would hide such a change.)"""

from __future__ import annotations

import sys

import pytest

from ember_xla.rewrites.canonicalize import canonicalize
from ember_xla.runtime.execute import run_module

lm = sys.modules["library_models"]     # loaded by conftest.py
tm = sys.modules["training_models"]

CASES = [("lib", n) for n in sorted(lm.MODELS)] + [("train", n) for n in sorted(tm.STEPS)]


@pytest.mark.parametrize("corpus,name", CASES)
def test_canonicalized_model_is_bit_equal(corpus, name):
    if corpus == "lib":
        module, args = lm.export(name).module, lm.inputs(name, "edge")
    else:
        module, args = tm.export(name)[0].module, tm.inputs(name, "edge")
    canon = module.clone()
    canonicalize(canon)
    for opts in ({}, {"xla_allow_excess_precision": False}):
        for i, (a, b) in enumerate(zip(run_module(canon, args, opts),
                                       run_module(module, args, opts), strict=True)):
            assert a.tobytes() == b.tobytes(), (name, opts, i)
