"""sliced-table: a lookup of a table sliced out of a bigger array (``lax.map`` over stacked
tables, ``T[a:b][ids]``, ``lax.dynamic_slice_in_dim``) becomes a lookup of the whole array as
rows at ``clamp(0, i, N-1) + o``: bitwise the same rows (the ``canon`` fixture runs both
modules on negative and out-of-range ids and slice starts), and the custom call of its bag
takes a bitcast of the array instead of a copy of the slice."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

PIPE = "inline-calls,sliced-table"
RNG = np.random.default_rng(11)
BIG = RNG.standard_normal((50, 4)).astype(np.float32)
STACK = RNG.standard_normal((3, 10, 4)).astype(np.float32)
IDS = np.array([[0, 9, -1], [12, 3, 3], [2**31 - 1, -2**31, 4]], np.int32)


def _gathers(module):
    return [op for op in module.walk() if op.opcode == "gather"]


def _flat(work, rows):
    (g,) = _gathers(work)
    assert tuple(g.operands[0].type.dims) == (rows, 4)
    assert g.operands[0].owner.opcode not in ("slice", "dynamic-slice")
    return g


def test_static_slice_reads_the_whole_array(canon):
    work, _ = canon(lambda t, i: t[20:30][i], [BIG, IDS], PIPE, inputs=[[BIG, -IDS]])
    _flat(work, 50)


@pytest.mark.parametrize("start", [0, 17, 40, 41, 1000, -5])
def test_dynamic_slice_start_is_clamped_as_xla_clamps_it(canon, start):
    """A start beyond 40 (= 50 - 10) reads rows 40..49, a negative one rows 0..9."""
    def f(t, s, i):
        return jax.lax.dynamic_slice_in_dim(t, s, 10)[i]

    s = np.int32(start)
    work, _ = canon(f, [BIG, s, IDS], PIPE, inputs=[[BIG, s, -IDS]])
    _flat(work, 50)


def test_take_fill_tests_ids_against_the_slice(canon):
    """jnp.take reads NaN for an id out of the 10-row slice, also one the array has."""
    def f(t, s, i):
        return jnp.take(jax.lax.dynamic_slice_in_dim(t, s, 10), i, axis=0)

    work, _ = canon(f, [BIG, np.int32(7), IDS], PIPE,
                    inputs=[[BIG, np.int32(7), IDS + 10], [BIG, np.int32(45), -IDS]])
    _flat(work, 50)
    assert canon.opcodes(work).count("select") >= 2   # the flat ids and the rebuilt fill


def test_table_of_a_stack_read_in_a_loop_body(canon):
    """lax.map over stacked tables: the loop body's lookup reads the stack [K*N, D]."""
    def f(ts, i):
        return jax.lax.map(lambda a: a[0][a[1]].sum(1), (ts, i))

    ids = np.stack([IDS, -IDS, IDS + 9])
    work, _ = canon(f, [STACK, ids], PIPE, inputs=[[STACK, ids * 3]])
    (g,) = _gathers(work)
    assert tuple(g.operands[0].type.dims) == (30, 4)


def test_slice_not_whole_in_d_stays(canon):
    work, _ = canon(lambda t, i: t[:, :2][i], [BIG, IDS], PIPE)
    (g,) = _gathers(work)
    assert g.operands[0].owner.opcode == "slice"


@pytest.mark.parametrize("form", ["sum", "take"])
def test_bag_over_stacked_tables_in_lax_map_takes_the_stack(form):
    """The padded bag inside the loop reads a bitcast of the loop's stacked tables (no slice
    written out per iteration); the rewritten module is bit-equal under both settings."""
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    k, b, p, n, d = 4, 64, 6, 500, 32
    rng = np.random.default_rng(12)
    tables = rng.standard_normal((k, n, d)).astype(np.float32)
    ids = rng.integers(-n, 2 * n, (k, b, p)).astype(np.int32)
    look = (lambda t, i: t[i]) if form == "sum" else (lambda t, i: jnp.take(t, i, axis=0))

    def f(ts, i):
        return jax.lax.map(lambda a: look(a[0], a[1]).sum(1), (ts, i))

    m = from_jax(f, tables, ids).module
    r = rewrite_module(m, cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["padded_bag"], r.near_misses
    (call,) = [op for op in r.module.walk() if op.opcode == "custom-call"]
    assert call.operands[0].owner.opcode == "reshape"
    assert tuple(call.operands[0].type.dims) == (k * n, d)
    for opts in ({}, {"xla_allow_excess_precision": False}):
        assert run_module(r.module, [tables, ids], opts)[0].tobytes() == \
            run_module(m, [tables, ids], opts)[0].tobytes()
