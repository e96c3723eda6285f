"""Every cluster kind the rewrite produces, through ``emulate`` on the single-core (tmu) and the
multi-core (tmu8) DAE target, with edge ids (negative, out of range: NaN rows under
``jnp.take``'s fill mode, zero rows under its ``fill_value=0`` (BCOO products), clamped rows
under clip, dropped segments): weighted and masked bags, max/min, mean/sqrt_n, bf16/f16
tables, a lookup reduced twice, grouped tables, a segment sum of rows XLA computes (a GNN's
MLP messages), a residual sum XLA folds into its scatter, and the training backward with its
fused SGD, Adagrad and rowwise Adagrad updates and Keras's scatter into the variable (corpus
steps, their edge and out-of-range ids, at -O0 and -O3). Each emulated cluster equals its
native kernel bit for bit and the model verifies; no cluster falls back (a refused
one would be listed with its one-line reason). The CPU rewrite's own forms: the weighted bag's
``sequential_fma`` order, the multi-output call (one pass over the rows, a result per
combiner) and the concatenating grouped call (the tables' rows side by side) emulate bit-equal
on tmu and tmu8."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.machines.config import load_target

ROWS, D, B, P = 40, 16, 6, 4


def _ids(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    ids = rng.integers(0, ROWS, shape).astype(np.int32)
    flat = ids.reshape(-1)
    flat[::5] = -1            # negative
    flat[2::7] = ROWS + 3     # out of range
    return ids


def _table(rng: np.random.Generator, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal((ROWS, D)).astype(dtype)


def _segments(rng: np.random.Generator, n: int) -> np.ndarray:
    s = np.sort(rng.integers(0, B, n)).astype(np.int32)
    s[-1] = B + 2             # out of range: dropped
    return s


def _weighted(rng):
    return (lambda t, i, w: (jnp.take(t, i, axis=0) * w[:, :, None]).sum(1),
            [_table(rng), _ids(rng, (B, P)), rng.standard_normal((B, P)).astype(np.float32)])


def _masked(rng):
    def f(t, i):
        mask = (i >= 0).astype(t.dtype)
        return (jnp.take(t, jnp.maximum(i, 0), axis=0) * mask[:, :, None]).sum(1)
    return f, [_table(rng), _ids(rng, (B, P))]


def _max_min(rng):
    def f(t, i, s):
        rows = jnp.take(t, i, axis=0, mode="clip")
        return (jax.ops.segment_max(rows, s, num_segments=B),
                jax.ops.segment_min(rows, s, num_segments=B))
    return f, [_table(rng), _ids(rng, (12,)), _segments(rng, 12)]


def _mean_sqrt_n(rng):
    """The ember calls themselves (a JAX mean is a sum and a divide left in XLA): a mean
    padded bag and a weighted sqrt_n offsets bag with an empty bag."""
    lc = _lowering_cases()
    mean = lc.ffi_fn("padded_bag", [((B, D), np.float32)], combiner="mean", index_bits=32,
                     init=2.5)
    lengths = np.array([3, 0, 4, 1, 2, 2])
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    sqrt_n = lc.ffi_fn("offsets_bag", [((B, D), np.float32)], combiner="sqrt_n",
                       weighted=True, index_bits=32, index_mode="fill")
    n = int(off[-1])

    def f(t, i, j, o, w):
        return mean(t, i), sqrt_n(t, j, o, w)
    return f, [_table(rng), _ids(rng, (B, P)), _ids(rng, (n,)), off,
               rng.standard_normal(n).astype(np.float32)]


def _lowering_cases():
    name = "lowering_cases"
    if name not in sys.modules:
        sys.path.insert(0, str(Path(__file__).parents[1] / "dae_target"))
    import lowering_cases

    return lowering_cases


def _narrow(dtype):
    def make(rng):
        return (lambda t, i: jnp.take(t, i, axis=0).sum(1),
                [_table(rng, dtype), _ids(rng, (B, P))])
    return make


def _reduced_twice(rng):
    def f(t, i, s):
        rows = jnp.take(t, i, axis=0)
        return (jax.ops.segment_sum(rows, s, num_segments=B),
                jax.ops.segment_max(rows, s, num_segments=B))
    return f, [_table(rng), _ids(rng, (12,)), _segments(rng, 12)]


def _concatenated(rng):
    def f(t1, t2, i1, i2, s1, s2):
        return jnp.concatenate([
            jax.ops.segment_sum(jnp.take(t1, i1, axis=0), s1, num_segments=B),
            jax.ops.segment_sum(jnp.take(t2, i2, axis=0), s2, num_segments=B)], axis=1)
    return f, [_table(rng), _table(rng), _ids(rng, (12,)), _ids(rng, (9,)),
               _segments(rng, 12), _segments(rng, 9)]


def _bcoo(rng):
    """jax.experimental.sparse's BCOO product: zero-filled lookups (index_mode "zero") times
    the stored values, an Inf and a NaN of which multiply out-of-range lookups' zero rows."""
    from jax.experimental import sparse

    n = 14
    cols = _ids(rng, (n,))
    data = rng.standard_normal(n).astype(np.float32)
    data[2], data[9] = np.inf, np.nan          # on out-of-range lookups: NaN rows
    idx = np.stack([_segments(rng, n), cols], 1).astype(np.int32)
    return (lambda t, w, i: sparse.BCOO((w, i), shape=(B, ROWS)) @ t, [_table(rng), data, idx])


def _segment_sum_of_rows(rng):
    """A GNN layer's messages made by an MLP over gathered rows, summed per receiver (no
    lookup: a forward ``scatter_grad``)."""
    n = 14
    w = (rng.standard_normal((2 * D, D)) * 0.3).astype(np.float32)

    def f(t, w, i, j, s):
        x = jnp.concatenate([jnp.take(t, i, axis=0), jnp.take(t, j, axis=0)], 1)
        return jax.ops.segment_sum(jax.nn.relu(x @ w), s, num_segments=B)
    return f, [_table(rng), w, _ids(rng, (n,)), _ids(rng, (n,)), _segments(rng, n)]


def _residual_fold(rng):
    """A GNN residual ``h + segment_sum(rows, s)``, which XLA folds into one scatter onto
    ``h`` (``ordered_scatter``, combiner add)."""
    n = 14

    def f(h, t, i, s):
        return h + jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=B)
    return f, [rng.standard_normal((B, D)).astype(np.float32), _table(rng), _ids(rng, (n,)),
               _segments(rng, n)]


KINDS = {"bcoo_zero_fill": _bcoo, "weighted": _weighted, "masked": _masked, "max_min": _max_min,
         "mean_sqrt_n": _mean_sqrt_n, "bf16": _narrow(ml_dtypes.bfloat16),
         "f16": _narrow(np.float16), "reduced_twice": _reduced_twice,
         "concatenated": _concatenated, "segment_sum_of_rows": _segment_sum_of_rows,
         "residual_fold": _residual_fold}
#: training steps of the corpus (tests/rewrites/training_models.py) on its edge ids: the
#: backward (scatter_grad), the fused SGD, Adagrad and rowwise Adagrad updates, and Keras's
#: SGD scatter into the variable (ordered_scatter)
STEPS = {"scatter_grad+sparse_sgd": "jraph_gcn_node_embed_sgd",
         "sparse_sgd": "flax_linen_bag_sum_sgd_donated",
         "sparse_adagrad": "flax_linen_bag_sum_adagrad",
         "sparse_rowwise_adagrad": "jax_two_tables_rowwise_adagrad_fused",
         "ordered_scatter": "keras_embedding_average_sgd"}


def fused_here(kind: str) -> bool:
    sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
    from training_steps import fused_here as fused

    return fused(kind)


@pytest.fixture(scope="module", params=sorted(KINDS) + sorted(STEPS))
def model(request):
    if "adagrad" in request.param and not fused_here(request.param):
        pytest.skip(f"{request.param} is not fused on this CPU")
    if request.param in STEPS:
        sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
        import training_models as tm

        return tm.export(STEPS[request.param])[0], tm.inputs(STEPS[request.param], "edge")
    fn, inputs = KINDS[request.param](np.random.default_rng(7))
    return from_jax(fn, *inputs), inputs


#: the clusters each case must produce (kind, combiner, weighted), in the DAE rewrite
KINDS_OF = {
    "weighted": [("padded_bag", "sum", True)], "masked": [("padded_bag", "sum", True)],
    "bcoo_zero_fill": [("segment_reduce", "sum", True)],
    "max_min": [("segment_reduce", "max", False), ("segment_reduce", "min", False)],
    "mean_sqrt_n": [("padded_bag", "mean", False), ("offsets_bag", "sqrt_n", True)],
    "bf16": [("padded_bag", "sum", False)], "f16": [("padded_bag", "sum", False)],
    "reduced_twice": [("segment_reduce", "sum", False), ("segment_reduce", "max", False)],
    "concatenated": [("grouped_segment_reduce", "sum", False)],
    "segment_sum_of_rows": [("scatter_grad", "sum", False)],
    "residual_fold": [("ordered_scatter", "add", False)],
    "scatter_grad+sparse_sgd": [("segment_reduce", "sum", False),
                                ("scatter_grad", "sum", False), ("sparse_sgd", "sum", False)],
    "sparse_sgd": [("padded_bag", "sum", False), ("sparse_sgd", "sum", False)],
    "sparse_adagrad": [("padded_bag", "sum", False), ("sparse_adagrad", "sum", False)],
    "sparse_rowwise_adagrad": [("padded_bag", "sum", False)] * 2 + [
        ("sparse_rowwise_adagrad", "sum", False)] * 2,
    "ordered_scatter": [("padded_bag", "sum", False), ("ordered_scatter", "subtract", False)],
}


def test_each_case_makes_its_kinds(request, model):
    from ember_xla.call_specs import cluster_spec, ember_calls
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    case = request.node.callspec.params["model"]
    m, _ = model
    got = [(s.kind, s.combiner, s.weighted) for s in
           map(cluster_spec, ember_calls(rewrite_for(m.module, "dae").module))]
    assert got == KINDS_OF[case]


def _assert_clusters_exact(checks: list[dict], key: str = "bitwise_equal") -> None:
    assert checks, "no cluster was emulated"
    bad = [c for c in checks if not c[key]]
    assert not bad, bad


def test_single_core(model):
    from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    m, inputs = model
    rewritten = rewrite_for(m.module, "dae").module
    em = emulate_module(m.module, rewritten, inputs,
                        EmulateOptions(load_target("tmu"), 3, "xla", native_fallback=True))
    refused = [(c.custom_call, c.refused) for c in em.report.clusters if c.refused]
    assert not refused, refused
    _assert_clusters_exact(em.report.verify["clusters_vs_native"])
    assert em.ok, em.report.verify["model"]


@pytest.mark.parametrize("case", ["edge", "oob"])
@pytest.mark.parametrize("kind", ["sparse_adagrad", "sparse_rowwise_adagrad",
                                  "ordered_scatter"])
def test_backward_at_O0_and_O3(kind, case):
    """The fused Adagrad updates and the ordered scatter on tmu at -O0 and -O3, with edge ids
    (duplicates, negative ids, empty bags) and ids out of range: every cluster equal to its
    kernel bit for bit, the model verified."""
    from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    if "adagrad" in kind and not fused_here(kind):
        pytest.skip(f"{kind} is not fused on this CPU")
    sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
    import training_models as tm

    m = tm.export(STEPS[kind])[0].module
    inputs = tm.inputs(STEPS[kind], case)
    rewritten = rewrite_for(m, "dae").module
    for level in (0, 3):
        em = emulate_module(m, rewritten, inputs,
                            EmulateOptions(load_target("tmu"), level, "xla"))
        kinds = [c.kind for c in em.report.clusters]
        assert f"ember.{kind}" in kinds, kinds
        _assert_clusters_exact(em.report.verify["clusters_vs_native"])
        assert em.ok, (level, em.report.verify["model"])


def test_multi_core(model):
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores
    from ember_xla.orchestrate.rewrite_model import rewrite_for_placement

    m, inputs = model
    rewritten = rewrite_for_placement(m.module).module
    run = emulate_on_cores(m.module, rewritten, inputs, load_target("tmu8"), "auto",
                           native_fallback=True)
    assert not run.fallback, run.fallback
    _assert_clusters_exact(run.verify["clusters_vs_native"])
    assert run.ok, run.verify["model"]
    # every cluster is placeable by share (the backward by rows of the table)
    assert all(w.whole_reason is None for w in run.works), [w.whole_reason for w in run.works]


#: CPU-rewritten forms: the kind of the call
CPU_FORMS = {"weighted": "padded_bag",          # sum_order = sequential_fma
             "concatenated": "grouped_segment_reduce_concat",
             "reduced_twice": "multi_segment_reduce",
             "segment_sum_of_rows": "scatter_grad", "residual_fold": "ordered_scatter"}


@pytest.mark.parametrize("case", sorted(CPU_FORMS))
def test_cpu_rewritten_calls(case):
    """The CPU rewrite's own forms on tmu (-O0, -O3) and tmu8: the weighted f32 bag's order
    (``sequential_fma``) lowers as fused multiply-adds, the multi-output call as one pass over
    the rows, the concatenating grouped call as each table's reduction then the rows side by
    side (cut by segments on tmu8: ``pieces`` counts the shares); every cluster equal to its
    kernel, the model equal to XLA:CPU bit for bit."""
    from ember_xla.call_specs import call_attributes, ember_calls
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores
    from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    fn, inputs = KINDS[case](np.random.default_rng(3))
    m = from_jax(fn, *inputs)
    cpu = rewrite_for(m.module, "cpu", cost_model=False).module
    calls = ember_calls(cpu)
    assert [c.attributes["custom_call_target"] for c in calls] == [f"ember.{CPU_FORMS[case]}"]
    if case == "weighted":
        assert call_attributes(calls[0])["sum_order"] == "sequential_fma"
    tmu = load_target("tmu")
    for level in (0, 3):
        em = emulate_module(m.module, cpu, inputs, EmulateOptions(tmu, level, "xla"))
        _assert_clusters_exact(em.report.verify["clusters_vs_native"])
        assert em.ok and em.report.verify["model"]["bitwise_equal"], em.report.verify
    run = emulate_on_cores(m.module, cpu, inputs, load_target("tmu8"), "symmetric",
                           engine="full")
    assert not run.fallback
    _assert_clusters_exact(run.verify["clusters_vs_native"])
    assert run.ok and run.verify["model"]["bitwise_equal"]
    assert all(w.whole_reason is None for w in run.works), [w.whole_reason for w in run.works]


#: the CPU rewrite's XLA:CPU orders: (ids shape, wrapped t[ids] rather than jnp.take, mean)
ORDER_CASES = {"blocked": ((64, 64), False, False), "blocked_mean": ((16, 300), False, True),
               "blocked_weighted_f16": ((64, 64), False, False),
               "blocked_scaled": ((64, 64), False, False),
               "vector8": ((8, 28), True, False), "vector8_mean": ((4, 32), True, True),
               "tree32": ((2, 100), True, False), "tree32_mean": ((2, 64), True, True)}


@pytest.mark.parametrize("case", sorted(ORDER_CASES))
def test_cpu_xla_orders_lower_in_that_order(case):
    """A padded bag the CPU rewrite gave one of XLA:CPU's orders (YNNPACK's blocked sum from
    4096 elements, a weighted f16 bag's products rounded to f16 first, as are f32 rows times one
    number (``jnp.take(t, i) * sqrt(D)``) to f32; the vectorized loop's
    vector8 for 25-32 rows; the tree-reduction windows' tree32 beyond) lowers to programs that
    add in that order: emulated at -O0..-O4 (both engines at -O0 and -O3) and on tmu8's cores,
    every cluster equal to its kernel and the model to XLA:CPU bit for bit. Adding the rows
    one after the other gives other bits on these inputs (checked), so the check can fail."""
    import jax.numpy as jnp

    from ember_xla.call_specs import call_attributes, ember_calls
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores
    from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
    from ember_xla.orchestrate.rewrite_model import rewrite_for
    from ember_xla.runtime.execute import run_module

    (b, p), wrapped, mean = ORDER_CASES[case]
    weighted, scaled = case.endswith("f16"), case.endswith("scaled")
    scale = np.float32(2.82842708)
    rng = np.random.default_rng(5)
    dt = np.float16 if weighted else np.float32
    inputs = [(rng.standard_normal((100, 16)) * (1 if weighted else 100)).astype(dt),
              rng.integers(-3 if wrapped else 0, 100, (b, p)).astype(np.int32)]
    if not wrapped:
        inputs[1][1, 7] = 100                               # one NaN row (fill mode)
    red = (lambda x: x.mean(1)) if mean else (lambda x: x.sum(1))
    if weighted:
        inputs.append(rng.standard_normal((b, p)).astype(np.float16))
        m = from_jax(lambda t, i, w: jnp.sum(jnp.take(t, i, axis=0) * w[..., None], axis=1,
                                             dtype=jnp.float32), *inputs)
    elif scaled:
        m = from_jax(lambda t, i: (jnp.take(t, i, axis=0) * scale).sum(1), *inputs)
    elif wrapped:
        m = from_jax(lambda t, i: red(t[i]), *inputs)
    else:
        m = from_jax(lambda t, i: red(jnp.take(t, i, axis=0)), *inputs)
    cpu = rewrite_for(m.module, "cpu", cost_model=False).module
    (call,) = ember_calls(cpu)
    assert call_attributes(call)["sum_order"] == case.split("_")[0]
    rows = inputs[0][np.where(inputs[1] < 0, inputs[1] + 100, inputs[1]).clip(0, 99)]
    rows = rows.astype(np.float32)
    if weighted:
        rows = (rows * inputs[2][..., None].astype(np.float32)).astype(np.float16)
    if scaled:
        rows = (rows * scale).astype(np.float32)
    seq = np.zeros((b, 16), np.float32)
    for k in range(p):
        seq = seq + rows[:, k].astype(np.float32)
    if mean:
        seq = seq * np.float32(1.0 / p)
    want = run_module(m.module, inputs)[0]
    if not wrapped:
        seq[1] = np.nan
    assert not np.array_equal(seq, want, equal_nan=True)   # the orders differ here
    tmu = load_target("tmu")
    for level in range(5):
        for engine in ("xla", "python") if level in (0, 3) else ("xla",):
            em = emulate_module(m.module, cpu, inputs, EmulateOptions(tmu, level, engine))
            _assert_clusters_exact(em.report.verify["clusters_vs_native"])
            assert em.ok and em.report.verify["model"]["bitwise_equal"], (level, engine)
    run = emulate_on_cores(m.module, cpu, inputs, load_target("tmu8"), "symmetric")
    _assert_clusters_exact(run.verify["clusters_vs_native"])
    assert run.ok  # symmetric cuts a batch of >= 8 bags into 8 shares, runs fewer whole
    assert run.verify["clusters_vs_native"][0]["pieces"] == (8 if b >= 8 else 1)


BACKWARD = ("scatter_grad", "sparse_sgd", "sparse_adagrad", "sparse_rowwise_adagrad",
            "ordered_scatter")


@pytest.mark.parametrize("case", ["edge", "oob"])
@pytest.mark.parametrize("step", ["jraph_gcn_node_embed_sgd", "flax_linen_bag_sum_adam",
                                  "flax_linen_bag_sum_adagrad",
                                  "flax_linen_bag_sum_optax_rowwise_adagrad",
                                  "keras_embedding_average_adagrad"])
def test_backward_split_by_table_rows(step, case):
    """The backward kinds cut by rows of the table over all 8 cores (symmetric): the gathered
    and the plain scatter_grad form, the fused SGD, Adagrad and rowwise Adagrad updates (table
    and accumulator rows cut alike) and Keras's scatter into the variable, edge ids
    (duplicates, negative, empty bags) and ids out of range, every share's rows stacked
    bit-equal to the native kernel."""
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores
    from ember_xla.orchestrate.rewrite_model import rewrite_for_placement

    sys.path.insert(0, str(Path(__file__).parents[1] / "rewrites"))
    import training_models as tm

    m = tm.export(step)[0].module
    inputs = tm.inputs(step, case)
    run = emulate_on_cores(m, rewrite_for_placement(m).module, inputs, load_target("tmu8"),
                           "symmetric", engine="full")
    assert not run.fallback and run.ok
    checks = {c["custom_call"]: c for c in run.verify["clusters_vs_native"]}
    back = [w for w in run.works if w.spec.kind in BACKWARD]
    assert back
    for w in back:
        assert checks[w.name]["bitwise_equal"]
        assert checks[w.name]["pieces"] == (8 if w.rows >= 8 else 1), (w.name, w.rows)


def test_concatenated_call_cut_by_segments():
    """The CPU rewrite's concatenating grouped call over 32 segments, cut over all 8 cores
    (symmetric): each share's rows of the one result, stacked, equal the kernel's bit for bit
    (edge ids: negative, out of range, dropped segments)."""
    from ember_xla.orchestrate.emulate_cores import emulate_on_cores
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    s = 32
    rng = np.random.default_rng(11)

    def f(t1, t2, i1, i2, s1, s2):
        return jnp.concatenate([
            jax.ops.segment_sum(jnp.take(t1, i1, axis=0), s1, num_segments=s),
            jax.ops.segment_sum(jnp.take(t2, i2, axis=0), s2, num_segments=s)], axis=1)

    seg = [np.sort(rng.integers(0, s, n)).astype(np.int32) for n in (90, 70)]
    seg[0][-1] = s + 2
    inputs = [_table(rng), _table(rng), _ids(rng, (90,)), _ids(rng, (70,)), *seg]
    m = from_jax(f, *inputs)
    cpu = rewrite_for(m.module, "cpu", cost_model=False).module
    run = emulate_on_cores(m.module, cpu, inputs, load_target("tmu8"), "symmetric",
                           engine="full")
    (check,) = run.verify["clusters_vs_native"]
    assert check["bitwise_equal"] and check["pieces"] == 8, check
    assert run.ok and run.verify["model"]["bitwise_equal"]
