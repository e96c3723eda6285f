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


def test_take_fill_over_stacked_tables_tests_each_id_against_its_table(canon):
    """flax Embed / jnp.take vmapped over the stack: an id out of its own table (10 rows)
    reads NaN, also when it would be in range of the flat table (30 rows)."""
    def f(ts, i):
        return jax.vmap(lambda t, i: jnp.take(t, i, axis=0))(ts, i)

    work, _ = canon(f, [TABLES, IDS], PIPE, inputs=[[TABLES, -IDS], [TABLES, IDS + 10]])
    (g,) = _gathers(work)
    assert tuple(g.operands[0].type.dims) == (30, 4)
    assert canon.opcodes(work).count("select") >= 2   # the flat ids and the rebuilt fill


_HUGE = """HloModule huge
ENTRY main {
  t = f32[3,1000000000,1] parameter(0)
  i = s32[3,4,1] parameter(1)
  ROOT g = f32[3,4,1] gather(t, i), offset_dims={2}, collapsed_slice_dims={1},
    start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0},
    index_vector_dim=2, slice_sizes={1,1,1}
}
"""


def test_stacked_tables_beyond_the_index_type_stay():
    from ember_xla.hlo.parser import parse_module
    from ember_xla.ir.passes import PassPipeline

    m = parse_module(_HUGE.replace("\n    ", " "))
    PassPipeline.from_spec("stacked-tables").apply(m)
    (g,) = [op for op in m.entry.ops if op.opcode == "gather"]
    assert g.attributes["gather_dimension_numbers"]["operand_batching_dims"] == [0]


@pytest.mark.parametrize("form", ["sum", "mean", "weighted", "take"])
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
           "weighted": lambda t, i, w: (t[i] * w[..., None]).sum(1),
           "take": lambda t, i: jnp.take(t, i, axis=0).sum(1)}[form]

    def f(*a):
        return jax.vmap(bag)(*a)

    args = [tables, ids, w] if form == "weighted" else [tables, ids]
    m = from_jax(f, *args).module
    r = rewrite_module(m, cost_model=False)
    assert [c["kind"] for c in r.clusters] == ["padded_bag"], r.near_misses
    for opts in ({}, {"xla_allow_excess_precision": False}):
        assert run_module(r.module, args, opts)[0].tobytes() == \
            run_module(m, args, opts)[0].tobytes()


def test_scatter_into_stacked_tables_drops_ids_out_of_their_table(canon):
    """The transpose of the vmapped lookup (a batched scatter-add) into one [K*N,D] scatter:
    an id out of its own table (10 rows) is dropped, also when the flat table has its row."""
    def grad_of_lookup(ts, i):
        return jax.grad(lambda ts: (jax.vmap(lambda t, i: t[i].sum(1))(ts, i) ** 2).sum())(ts)

    work, _ = canon(grad_of_lookup, [TABLES, IDS], PIPE,
                    inputs=[[TABLES, -IDS], [TABLES, IDS + 10]])
    (s,) = [op for op in work.entry.ops if op.opcode == "scatter"]
    assert tuple(s.result.type.dims) == (30, 4)
    assert not s.attributes["scatter_dimension_numbers"].get("input_batching_dims")


@pytest.mark.parametrize("mode", ["promise", "clip"])
def test_training_step_over_stacked_tables_has_its_gradient(mode):
    """The forward bag and its gradient are both clusters (the gradient is the lookup's:
    forward-lookup pairs the scatter's in-bounds flat ids with the lookup's clamped ones, or
    the clamped ids themselves in clip mode); outputs bit-equal."""
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    k, b, p, n, d = 3, 32, 4, 200, 16
    rng = np.random.default_rng(9)
    tables = rng.standard_normal((k, n, d)).astype(np.float32)
    ids = rng.integers(-n, 2 * n, (k, b, p)).astype(np.int32)
    y = rng.standard_normal(b).astype(np.float32)
    w = rng.standard_normal(k * d).astype(np.float32)
    look = (lambda t, i: t[i]) if mode == "promise" else (
        lambda t, i: jnp.take(t, i, axis=0, mode="clip"))

    def step(ts, i, y, w):
        def loss(ts):
            e = jax.vmap(lambda t, i: look(t, i).sum(1))(ts, i)      # [K,B,D]
            return jnp.mean((jnp.transpose(e, (1, 0, 2)).reshape(b, -1) @ w - y) ** 2)
        return ts - 0.1 * jax.grad(loss)(ts)

    args = [tables, ids, y, w]
    m = from_jax(step, *args).module
    r = rewrite_module(m, cost_model=False)
    assert sorted(c["kind"] for c in r.clusters) == ["padded_bag", "scatter_grad"], \
        r.near_misses
    for opts in ({}, {"xla_allow_excess_precision": False}):
        assert run_module(r.module, args, opts)[0].tobytes() == \
            run_module(m, args, opts)[0].tobytes()


@pytest.mark.parametrize("opt", ["sgd", "adagrad", "adam", "clip"])
def test_optimizer_over_stacked_tables_is_fused_or_stays_exact(opt):
    """The optimizer's update of the stack is moved onto the flat gradient: SGD and Adagrad
    fuse into the sparse optimizer call; Adam's and a global-norm clip's (a reduction over the
    moved elementwise ops) stay in XLA; bit-equal either way."""
    import optax

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    k, b, p, n, d = 3, 32, 4, 200, 16
    rng = np.random.default_rng(10)
    tables = rng.standard_normal((k, n, d)).astype(np.float32)
    ids = rng.integers(-n, 2 * n, (k, b, p)).astype(np.int32)
    y = rng.standard_normal(b).astype(np.float32)
    w = rng.standard_normal(k * d).astype(np.float32)
    tx = {"sgd": optax.sgd(0.1), "adagrad": optax.adagrad(0.1),
          "adam": optax.adam(1e-3),
          "clip": optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))}[opt]
    state = tx.init(jnp.asarray(tables))

    def step(ts, state, i, y, w):
        def loss(ts):
            e = jax.vmap(lambda t, i: t[i].sum(1))(ts, i)
            return jnp.mean((jnp.transpose(e, (1, 0, 2)).reshape(b, -1) @ w - y) ** 2)
        g = jax.grad(loss)(ts)
        upd, state = tx.update(g, state, ts)
        return optax.apply_updates(ts, upd), state

    flat_state = [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]
    args = [tables, *flat_state, ids, y, w]
    jf = jax.jit(lambda ts, *rest: step(ts, jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(state), rest[:len(flat_state)]), *rest[len(flat_state):]))
    m = from_jax(jf, *args).module
    r = rewrite_module(m, cost_model=False)
    grads = [c for c in r.clusters if c["kind"] == "scatter_grad"]
    assert len(grads) == 1, r.near_misses
    assert grads[0].get("optimizer") == (None if opt in ("adam", "clip") else opt), grads[0]
    for opts in ({}, {"xla_allow_excess_precision": False}):
        for a, e in zip(run_module(r.module, args, opts), run_module(m, args, opts),
                        strict=True):
            assert a.tobytes() == e.tobytes()


def test_claims_on_ids_are_dropped_where_out_of_table_ids_become_minus_one(canon):
    """Sorted, unique ids of each table stay sorted and unique in the flat table only while
    every id is in its table; the flat ids write -1 for each other one, so the gather under
    jnp.take's fill and the dropping scatter lose both claims."""
    sids = np.sort(IDS, axis=-1)

    def take(ts, i):
        return jax.vmap(lambda t, i: jnp.take(t, i, axis=0, indices_are_sorted=True))(ts, i)

    work, _ = canon(take, [TABLES, sids], PIPE)
    (g,) = _gathers(work)
    assert "indices_are_sorted" not in g.attributes

    def add(ts, i, u):
        return jax.vmap(lambda t, i, u: t.at[i].add(
            u, indices_are_sorted=True, unique_indices=True, mode="drop"))(ts, i, u)

    upd = RNG.standard_normal(sids.shape + (4,)).astype(np.float32)
    uniq = np.array([[[-3, 2, 11], [0, 4, 9]]] * 3, np.int32)
    work, _ = canon(add, [TABLES, uniq, upd[:, :2]], PIPE)
    (s,) = [op for op in work.entry.ops if op.opcode == "scatter"]
    assert tuple(s.result.type.dims) == (30, 4)
    assert "indices_are_sorted" not in s.attributes and "unique_indices" not in s.attributes
