"""stacked-tables: jax.vmap of a lookup over stacked tables [K,N,D] (a gather with operand
batching dims) becomes a lookup of one [K*N,D] table at clamp(ids, 0, N-1) + k*N, bitwise the
same rows (the ``canon`` fixture runs both modules, out-of-range and negative ids included);
the bag then is a padded bag."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

PIPE = "inline-calls,stacked-tables"
RNG = np.random.default_rng(7)
TABLES = RNG.standard_normal((3, 10, 4)).astype(np.float32)
IDS = np.array([[[0, 9, -1], [12, 3, 3]], [[-10, -11, 5], [10, 0, 9]],
                [[2**31 - 1, -2**31, 4], [1, 1, 1]]], np.int32)


def _gathers(work):
    return [op for op in work.entry.ops if op.opcode == "gather"]


def test_vmapped_lookup_reads_one_flat_table(canon):
    def f(ts, i):
        return jax.vmap(lambda t, i: t[i])(ts, i)

    work, _ = canon(f, [TABLES, IDS], PIPE,
                    inputs=[[RNG.standard_normal((3, 10, 4)).astype(np.float32), -IDS]])
    (g,) = _gathers(work)
    assert tuple(g.operands[0].type.dims) == (30, 4)
    assert not g.attributes["gather_dimension_numbers"].get("operand_batching_dims")


def test_take_fill_over_stacked_tables_is_left_alone(canon):
    def f(ts, i):
        return jax.vmap(lambda t, i: jnp.take(t, i, axis=0))(ts, i)

    work, _ = canon(f, [TABLES, IDS], PIPE)
    (g,) = _gathers(work)
    assert g.attributes["gather_dimension_numbers"]["operand_batching_dims"] == [0]


@pytest.mark.parametrize("form", ["sum", "mean", "weighted"])
def test_vmapped_bag_over_stacked_tables_is_a_padded_bag(form):
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    k, b, p, n, d = 4, 64, 6, 500, 32
    rng = np.random.default_rng(8)
    tables = rng.standard_normal((k, n, d)).astype(np.float32)
    ids = rng.integers(-n, 2 * n, (k, b, p)).astype(np.int32)
    w = rng.standard_normal((k, b, p)).astype(np.float32)
    bag = {"sum": lambda t, i: t[i].sum(1), "mean": lambda t, i: t[i].mean(1),
           "weighted": lambda t, i, w: (t[i] * w[..., None]).sum(1)}[form]

    def f(*a):
        return jax.vmap(bag)(*a)

    args = [tables, ids, w] if form == "weighted" else [tables, ids]
    m = from_jax(f, *args).module
    r = rewrite_module(m, cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["padded_bag"], r.near_misses
    for opts in ({}, {"xla_allow_excess_precision": False}):
        assert run_module(r.module, args, opts)[0].tobytes() == \
            run_module(m, args, opts)[0].tobytes()


def test_take_fill_bag_over_stacked_tables_names_the_reason():
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    def f(ts, i):
        return jax.vmap(lambda t, i: jnp.take(t, i, axis=0).sum(1))(ts, i)

    r = rewrite_module(from_jax(f, TABLES, IDS).module, cost_model=False)
    assert not r.clusters
    assert any("stacked tables" in n["reason"] for n in r.near_misses), r.near_misses
