"""Max and min padded bags (``t[ids].max(1)``, ``jnp.take(t, ids, 0).min(1)``) are bit-equal to
XLA:CPU -- NaN payloads and signs, signed zeros, infinities and denormals compared as bytes --
in both of its regimes: its own reduce loop below 4096 elements (NaN propagates) and YNNPACK's
reduce from 4096 on (NaN dropped, ties resolved by its groups of 4 rows); under both settings
of ``xla_allow_excess_precision``. Bags whose semantics are not reproduced stay in XLA with a
reason."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.runtime.execute import run_module

OPTIONS = {"excess": None, "no_excess": {"xla_allow_excess_precision": False}}
_NANS = np.array([0x7FC00000, 0xFFC00000, 0x7FC00001, 0xFFC00005],
                 np.uint32).view(np.float32)
_SPECIAL = np.array([-0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, 1e-40, -1e-40, 3e-39],
                    np.float32)
# B, P, D: XLA's own loop (< 4096 elements: P from 2 to 19, tree windows from 33 rows, D = 1),
# 4095 / 4096 elements, YNNPACK (D not a multiple of 8 or 16, P = 2, short last
# groups, P > 512)
SHAPES = [(4, 5, 8), (3, 2, 5), (2, 19, 30), (1, 33, 100), (1, 100, 40), (8, 500, 1),
          (7, 13, 45), (16, 16, 16), (64, 64, 2), (64, 10, 16),
          (3, 9, 200), (1, 300, 17), (16, 256, 3), (2, 2, 2048), (33, 33, 33), (9, 7, 100),
          (4, 600, 24)]
FUNCS = {
    "max": lambda t, i: t[i].max(1),
    "min": lambda t, i: t[i].min(1),
    "take-clip-min": lambda t, i: jnp.take(t, i, 0, mode="clip").min(1),
    "take-fill-max": lambda t, i: jnp.take(t, i, 0, mode="fill").max(1),
    "take-default-fill-min": lambda t, i: jnp.take(t, i, 0).min(1),
}


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8).reshape(a.size, a.itemsize)


def _table(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """Ordinary values, a third of them replaced by NaNs (four payloads and signs), signed
    zeros, infinities, ±1 and denormals (no signalling NaNs: not reproduced, RELIABILITY.md);
    then rows of all NaN, all -0, all +0 and all denormal."""
    t = rng.standard_normal((n, d)).astype(np.float32)
    u = rng.random((n, d))
    t = np.where(u < 0.05, rng.choice(_NANS, (n, d)), t)
    t = np.where((u >= 0.05) & (u < 0.33), rng.choice(_SPECIAL, (n, d)), t)
    t[0], t[1], t[2], t[3] = _NANS[1], -0.0, 0.0, -1e-40
    return t


def _ids(b: int, p: int, n: int, rng: np.random.Generator, fill: bool) -> np.ndarray:
    ids = rng.integers(0, n, (b, p))
    if fill:  # out of range (a NaN row in fill mode), negative (wrapped by t[ids])
        ids = np.where(rng.random((b, p)) < 0.05, n + 3, ids)
    ids = np.where(rng.random((b, p)) < 0.05, -1 - rng.integers(0, n, (b, p)), ids)
    return ids.astype(np.int32)


def _expect_kept(fn, args, words: str) -> None:
    r = rewrite_module(from_jax(fn, *args).module, cost_model=False)
    assert not r.clusters
    reasons = " ".join(str(n.get("reason", "")) for n in r.near_misses)
    assert words in reasons, reasons


def _run(fn, args, opts) -> tuple[np.ndarray, np.ndarray, object]:
    m = from_jax(fn, *args)
    r = rewrite_module(m.module, cost_model=False)
    assert r.clusters, r.near_misses
    return (run_module(m.module, args, OPTIONS[opts])[0], run_module(r.module, args,
                                                                     OPTIONS[opts])[0], r)


@pytest.mark.parametrize("kind,shape,opts", [
    pytest.param(k, s, o, id=f"{k}-{'x'.join(map(str, s))}-{o}")
    for k, s, o in itertools.product(FUNCS, SHAPES, OPTIONS)])
def test_bits_equal(kind, shape, opts):
    b, p, d = shape
    rng = np.random.default_rng(b * 1_000_003 + p * 1009 + d + len(kind))
    n = 60
    args = [_table(n, d, rng), _ids(b, p, n, rng, "fill" in kind)]
    if "fill" in kind and b * p * d < 4096 and p >= 20:
        _expect_kept(FUNCS[kind], args, "fill mode")
        return
    want, got, r = _run(FUNCS[kind], args, opts)
    order = r.clusters[0]["attributes"]["sum_order"]
    assert order == ("reduce_loop" if b * p * d < 4096 else "ynn_groups4")
    diff = (_bits(want) != _bits(got)).any(1)
    assert not diff.any(), (f"{int(diff.sum())} of {want.size} outputs differ, e.g. "
                            f"{want.ravel()[diff][:4]} vs {got.ravel()[diff][:4]}")


@pytest.mark.parametrize("values,order", [
    # the loop: NaN anywhere wins; YNNPACK: a NaN is dropped unless the whole bag is NaN
    ([np.nan, 1.0, 2.0], None), ([1.0, 2.0, np.nan], None), ([1.0, np.nan, 2.0], None),
    ([np.nan] * 3, None), ([-0.0, 0.0], None), ([0.0, -0.0], None), ([-0.0, -0.0, -0.0], None),
    ([np.inf, np.nan, -np.inf], None), ([-1e-40, -0.0, 0.0, 1e-40, -0.0], None)])
def test_adversarial_bags(values, order):
    """One bag's column per shape regime, the same values in every bag: bits equal."""
    p = len(values)
    for b, d in ((2, 4), (64, 16)):  # < 4096 and >= 4096 elements
        t = np.tile(np.array(values, np.float32)[:, None], (1, d))
        ids = np.tile(np.arange(p, dtype=np.int32), (b, 1))
        for fn in (FUNCS["max"], FUNCS["min"]):
            for opts in OPTIONS:
                want, got, _ = _run(fn, [t, ids], opts)
                assert np.array_equal(_bits(want), _bits(got)), (values, b, d, want[0], got[0])


@pytest.mark.parametrize("fn,args,words", [
    (lambda t, i: t[i].max(1), [np.zeros((50, 1), np.float32), np.zeros((4096, 2), np.int32)],
     "16-lane"),
    (lambda t, i: t[i].max(1), [np.zeros((50, 8), np.float32), np.zeros((4, 1), np.int32)],
     "one row"),
    (lambda t, i: t[i].min(1), [np.zeros((50, 8), ml_dtypes.bfloat16),
                                np.zeros((4, 3), np.int32)], "f32 rows only"),
    (lambda t, i: t[i].max(1), [np.zeros((50, 8), np.float16), np.zeros((64, 10), np.int32)],
     "f32 rows only"),
    (lambda t, i: t[i].max(1), [np.zeros((50, 8), np.float32), np.zeros((2, 20), np.int32)],
     "vectorizes"),
    (lambda t, i: t[i].min(1), [np.zeros((50, 4), np.float32), np.zeros((1, 32), np.int32)],
     "vectorizes"),
    (lambda t, i: t[i].min(1), [np.zeros((50, 1), np.float32), np.zeros((1, 609), np.int32)],
     "tree windows"),
])
def test_kept_with_reason(fn, args, words):
    _expect_kept(fn, args, words)


@pytest.mark.parametrize("b,p,d,order", [(4, 6, 8, "reduce_loop"), (64, 10, 16, "ynn_groups4")])
def test_keras_global_max_pooling(b, p, d, order):
    """Keras 3 (TF backend) Embedding + GlobalMaxPooling1D, exported through ember's TF path,
    with an adversarial table: one cluster in XLA:CPU's order, bytes equal to the original."""
    import keras

    from ember_xla.hlo_import.tf_source import from_tf_function

    n = 60
    rng = np.random.default_rng(b + p + d)
    table = _table(n, d, rng)
    inp = keras.Input((p,), dtype="int32")
    emb = keras.layers.Embedding(n, d)
    model = keras.Model(inp, keras.layers.GlobalMaxPooling1D()(emb(inp)))
    emb.set_weights([table])
    ids = rng.integers(0, n, (b, p)).astype(np.int32)
    m = from_tf_function(lambda i: model(i), ids, source=f"keras_gmp_{b}x{p}x{d}")
    r = rewrite_module(m.module, cost_model=False)
    assert len(r.clusters) == 1, r.near_misses
    assert r.clusters[0]["attributes"]["sum_order"] == order
    args = [ids] + [np.asarray(m.bound[k]) for k in sorted(m.bound)]
    assert any(a.tobytes() == table.tobytes() for a in args[1:])  # the adversarial table
    for opts in OPTIONS:
        want = run_module(m.module, args, OPTIONS[opts])[0]
        got = run_module(r.module, args, OPTIONS[opts])[0]
        assert np.array_equal(_bits(want), _bits(got)), opts


def test_dae_lowering_refuses_the_xla_semantics_and_keeps_max_bags_in_xla():
    """The DAE contract has no XLA:CPU max/min semantics: the CPU rewrite's max bag reads as a
    refusal naming them; the DAE machine's own rewrite keeps max bags in XLA."""
    from ember_xla.call_specs import LoweringRefused, cluster_spec, ember_calls

    args = [np.zeros((60, 16), np.float32), np.zeros((64, 10), np.int32)]
    m = from_jax(FUNCS["max"], *args)
    (call,) = ember_calls(rewrite_module(m.module, cost_model=False).module)
    with pytest.raises(LoweringRefused, match="not in the DAE contract"):
        cluster_spec(call)
    dae = rewrite_module(m.module, cost_model=False, xla_order=False)
    assert not dae.clusters
    assert "DAE programs do not" in str(dae.near_misses)


@pytest.mark.parametrize("b,p,d", [(4, 5, 8), (64, 10, 16)])
def test_embedding_bag_padded_max_is_the_jnp_bag(b, p, d):
    """``ember_xla.embedding_bag`` asks the same rule: its padded max/min bags give the bytes
    of the jnp bag they replace, in both regimes."""
    import jax

    from ember_xla import embedding_bag

    rng = np.random.default_rng(b * p * d)
    n = 60
    table, ids = _table(n, d, rng), rng.integers(0, n, (b, p)).astype(np.int32)
    for combiner in ("max", "min"):
        want = np.asarray(jax.jit(FUNCS[combiner])(table, ids))
        got = np.asarray(jax.jit(lambda t, i, c=combiner: embedding_bag(t, i, combiner=c))(
            table, ids))
        assert got.tobytes() == want.tobytes(), combiner


def test_sum_and_max_of_one_bag_are_two_calls():
    """A bag's sum and max (one gather, two reduces): two padded-bag calls; the max bytes
    equal, the sum's too but for NaN payloads (a sum's NaN payload is not reproduced,
    RELIABILITY.md)."""
    rng = np.random.default_rng(3)
    args = [_table(60, 16, rng), rng.integers(0, 60, (64, 10)).astype(np.int32)]
    m = from_jax(lambda t, i: (t[i].sum(1), t[i].max(1)), *args)
    r = rewrite_module(m.module, cost_model=False)
    assert sorted(c["attributes"]["sum_order"] for c in r.clusters) == ["blocked", "ynn_groups4"]
    for opts in OPTIONS:
        (ws, wm), (gs, gm) = (run_module(x, args, OPTIONS[opts]) for x in (m.module, r.module))
        assert wm.tobytes() == gm.tobytes(), opts
        nan = np.isnan(ws)
        assert np.array_equal(nan, np.isnan(gs)) and ws[~nan].tobytes() == gs[~nan].tobytes()


@pytest.mark.parametrize("b,p,d", [(3, 513, 100), (2, 40, 1500), (1, 8, 4097), (2, 16, 2500),
                                   (2, 8, 4096)])
def test_ynnpack_tiles_of_the_bag_axis(b, p, d):
    """YNNPACK reduces the bag axis in tiles of floor(32768 / D) rows, each in groups of 4: a
    (+0, -0) / (-0, +0) / (NaN, +0) pair of rows at every position of the bag (-1 elsewhere)
    gives +0 or -0 by where the tiles and groups cut it; bytes equal."""
    table = np.full((p, d), -1.0, np.float32)
    pairs = [(0.0, -0.0), (-0.0, 0.0), (np.nan, 0.0)]
    for c in range(d):
        q = (c * 7 + 3) % (p - 1)
        table[q, c], table[q + 1, c] = pairs[(c // (p - 1)) % 3]
    ids = np.tile(np.arange(p, dtype=np.int32), (b, 1))
    for kind in ("max", "min"):
        t = table if kind == "max" else -table
        want, got, r = _run(FUNCS[kind], [t, ids], "excess")
        assert r.clusters[0]["attributes"]["sum_order"] == "ynn_groups4"
        assert want.tobytes() == got.tobytes(), kind


@pytest.mark.parametrize("b,p,d,kept", [(2, 40, 1500, True), (3, 100, 1000, True),
                                        (2, 8, 4096, False), (2, 160, 204, False)])
def test_sums_over_ynnpack_tiles_stay_in_xla(b, p, d, kept):
    """The same tiles cut a sum: a bag of more rows than floor(32768 / D) stays in XLA with the
    reason (the blocked sum across tiles is not XLA's); the others stay bit-equal."""
    rng = np.random.default_rng(d)
    args = [(rng.standard_normal((200, d)) * 1e3).astype(np.float32),
            rng.integers(0, 200, (b, p)).astype(np.int32)]
    fn = lambda t, i: t[i].sum(1)  # noqa: E731
    if kept:
        _expect_kept(fn, args, "in tiles of that many rows")
        return
    want, got, r = _run(fn, args, "excess")
    assert r.clusters[0]["attributes"]["sum_order"] == "blocked"
    assert want.tobytes() == got.tobytes()
