"""Clusters XLA:CPU computes at compile time: a bag whose table and ids are both constants
(captured from Python as numpy arrays) is folded by XLA in an order of its own, so it stays in
XLA with that reason, and canonicalization leaves its ops as they are; a constant table read
at run-time ids is an ordinary bag. Each beside an ordinary bag that is rewritten, so the
rewritten module (not jax's own) is what runs; outputs bitwise XLA:CPU's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

RNG = np.random.default_rng(7)
T = (RNG.standard_normal((1000, 64)) * np.exp(3 * RNG.standard_normal((1000, 64))))
T = T.astype(np.float32)
IDS = RNG.integers(0, 1000, (128, 10)).astype(np.int32)
STACK = T.reshape(4, 250, 64)
STACK_IDS = RNG.integers(0, 250, (4, 32, 10)).astype(np.int32)


def _rewrite(fn):
    m = from_jax(jax.jit(fn), T, IDS).module
    r = rewrite_module(m, cost_model=False)
    for opts in ({}, {"xla_allow_excess_precision": False}):
        got, want = run_module(r.module, [T, IDS], opts), run_module(m, [T, IDS], opts)
        for a, b in zip(got, want, strict=True):
            assert a.tobytes() == b.tobytes()
    return r


def test_constant_bag_stays_in_xla():
    r = _rewrite(lambda t, i: (jnp.asarray(T)[IDS].sum(1), t[i].sum(1)))
    assert len(r.clusters) == 1
    assert any("constant" in n["reason"] and "compile time" in n["reason"]
               for n in r.near_misses)


def test_constant_stacked_tables_keep_their_form():
    """vmap over constant stacked tables and constant ids: stacked-tables and batched-bags
    would turn the folded bag into another computation, folded in another order."""
    r = _rewrite(lambda t, i: (jax.vmap(lambda s, j: s[j].sum(1))(jnp.asarray(STACK),
                                                                   STACK_IDS),
                               t[i].sum(1)))
    assert len(r.clusters) == 1


def test_constant_table_at_run_time_ids_is_rewritten():
    r = _rewrite(lambda t, i: (jnp.asarray(T)[i].sum(1), t[i].sum(1)))
    assert len(r.clusters) == 2


def test_constants_reached_through_a_call_keep_their_form():
    """The constant rows come out of a nested jit returning two values (a ``call``, then
    ``get-tuple-element``s): only once inline-calls and fold-tuple-index have edited the
    module are the bag's operands compile-time values. The passes share what they know of
    constants only until one edits the module; otherwise batched-bags would regroup the
    folded bag, as it does with the skip left out."""
    from ember_xla.rewrites.canonicalize import canonicalize

    two = jax.jit(lambda: (jnp.asarray(T)[jnp.asarray(STACK_IDS)], jnp.asarray(T)[:2]))

    def f(t, i):
        rows, head = two()
        return rows.sum(2), head, t[i].sum(1)

    m = from_jax(jax.jit(f), T, IDS).module
    assert {"call", "get-tuple-element"} <= {op.opcode for op in m.entry.ops}
    canonicalize(m)
    bags = [op for op in m.entry.ops if op.opcode == "reduce"]
    assert [op.attributes["dimensions"] for op in bags] == [[2], [1]]
    r = _rewrite(f)
    assert len(r.clusters) == 1
