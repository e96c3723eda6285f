"""``ember_xla.embedding_bag`` on padded ``[B, P]`` bags (against numpy and XLA:CPU) and under
``jax.vmap`` (the batching rule: one native call for the whole batch, each element's floats
exactly those of its own call), batched over any argument, eager and under ``jax.jit``, and the
gradient of a vmapped padded bag."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember_xla

N, D, B, P, K = 40, 8, 6, 4, 3
rng = np.random.default_rng(0)
TABLE = rng.standard_normal((N, D)).astype(np.float32)
IDS = rng.integers(-45, 45, (B, P)).astype(np.int32)           # negative and out of range
WEIGHTS = rng.standard_normal((B, P)).astype(np.float32)


def _sequential(rows: np.ndarray, combiner: str) -> np.ndarray:
    """Rows [B, P, D] pooled in order (bag by bag, lookup by lookup) in f32."""
    acc = rows[:, 0].copy()
    for j in range(1, rows.shape[1]):
        acc = acc + rows[:, j]
    if combiner == "mean":
        acc = acc * (np.float32(1) / np.float32(rows.shape[1]))
    return acc


@pytest.mark.parametrize("weighted", [False])  # weighted f32: one fma per row (vs XLA below)
@pytest.mark.parametrize("mode, wrap", [("clip", False), ("clip", True), ("fill", False)])
@pytest.mark.parametrize("combiner", ["sum", "mean", "max"])
def test_padded_bags_equal_numpy(combiner, mode, wrap, weighted):
    ids = np.where(IDS < 0, IDS + N, IDS) if wrap else IDS
    if mode == "clip":
        rows = TABLE[np.clip(ids, 0, N - 1)]
    else:
        rows = np.where(((ids < 0) | (ids >= N))[..., None], np.float32(np.nan),
                        TABLE[np.clip(ids, 0, N - 1)])
    if weighted:
        rows = rows * WEIGHTS[..., None]
    want = rows.max(1) if combiner == "max" else _sequential(rows, combiner)
    got = ember_xla.embedding_bag(TABLE, IDS, weights=WEIGHTS if weighted else None,
                                  combiner=combiner, mode=mode, wrap_negative=wrap)
    assert np.array_equal(np.asarray(got), want, equal_nan=True)


@pytest.mark.parametrize("combiner", ["sum", "mean"])
def test_padded_bag_and_its_gradient_equal_xla(combiner):
    ids = np.clip(IDS, 0, N - 1)
    cot = rng.standard_normal((B, D)).astype(np.float32)

    def ours(t, w):
        return ember_xla.embedding_bag(t, ids, weights=w, combiner=combiner)

    def xla(t, w):
        rows = jnp.take(t, ids, axis=0) * w[..., None]
        return rows.mean(1) if combiner == "mean" else rows.sum(1)

    if combiner == "sum":  # XLA sums P = 4 rows in order, weighted with one fma per row
        for w in (np.ones_like(WEIGHTS), WEIGHTS):
            assert np.array_equal(np.asarray(ours(TABLE, w)), np.asarray(jax.jit(xla)(TABLE, w)))
    grads = [jax.jit(jax.grad(lambda t, w, f=f: (f(t, w) * cot).sum(), argnums=(0, 1)))(
        TABLE, WEIGHTS) for f in (ours, xla)]
    for a, b in zip(*grads, strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def _offsets_case():
    ids = rng.integers(-45, 45, (K, 12)).astype(np.int32)
    offsets = np.array([[0, 3, 3, 8, 12], [1, 1, 5, 9, 10], [0, 0, 0, 0, 0]], np.int32)
    return ids, offsets


CASES = {  # layout -> (kwargs builder, batched operands)
    "offsets": lambda: dict(zip(("indices", "offsets"), _offsets_case(), strict=True)),
    "segments": lambda: {"indices": rng.integers(-45, 45, (K, 12)).astype(np.int32),
                         "segment_ids": rng.integers(-1, 6, (K, 12)).astype(np.int32)},
    "padded": lambda: {"indices": rng.integers(-45, 45, (K, B, P)).astype(np.int32)},
}


def _call(layout, combiner, mode):
    def f(table, indices, bounds, weights):
        kw = {"offsets": {"offsets": bounds}, "segments": {"segment_ids": bounds,
                                                           "num_segments": 5},
              "padded": {}}[layout]
        return ember_xla.embedding_bag(table, indices, weights=weights, combiner=combiner,
                                       mode=mode, wrap_negative=True, **kw)
    return f


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("batched", ["table", "indices", "bounds", "weights", "all"])
@pytest.mark.parametrize("mode", ["clip", "fill"])
@pytest.mark.parametrize("combiner", ["sum", "mean", "min"])
@pytest.mark.parametrize("layout", ["offsets", "segments", "padded"])
def test_vmap_is_one_call_with_each_elements_floats(layout, combiner, mode, batched, jit):
    if layout == "padded" and batched == "bounds":
        pytest.skip("padded bags have no bounds")
    case = CASES[layout]()
    indices = case["indices"]
    bounds = case.get("offsets", case.get("segment_ids"))
    weights = rng.standard_normal(indices.shape).astype(np.float32)
    tables = rng.standard_normal((K, N, D)).astype(np.float32)
    args = {"table": tables, "indices": indices, "bounds": bounds, "weights": weights}
    axes = {k: 0 if batched in (k, "all") else None for k in args}
    if layout == "padded":
        axes["bounds"], args["bounds"] = None, None
    args = {k: (v if axes[k] == 0 or v is None else v[0]) for k, v in args.items()}
    f = _call(layout, combiner, mode)
    vf = jax.vmap(f, in_axes=tuple(axes[k] for k in ("table", "indices", "bounds", "weights")))
    vf = jax.jit(vf) if jit else vf
    got = np.asarray(vf(*args.values()))
    for k in range(K):
        one = [v if axes[n] is None else v[k] for n, v in args.items()]
        assert np.array_equal(got[k], np.asarray(f(*one)), equal_nan=True), k
    text = jax.jit(vf).lower(*args.values()).as_text()
    assert text.count("stablehlo.custom_call @ember.") == 1  # one call for the K elements


def test_vmap_of_the_gradient_of_a_padded_bag():
    tables = rng.standard_normal((K, N, D)).astype(np.float32)
    ids = rng.integers(0, N, (K, B, P)).astype(np.int32)

    def loss(t, ids):
        return jnp.sum(ember_xla.embedding_bag(t, ids, combiner="mean") ** 2)

    got = jax.vmap(jax.grad(loss))(tables, ids)
    for k in range(K):
        assert np.array_equal(np.asarray(got[k]), np.asarray(jax.grad(loss)(tables[k], ids[k])))


def test_padded_bad_arguments():
    with pytest.raises(ValueError, match="padded bags"):
        ember_xla.embedding_bag(TABLE, IDS, np.arange(B + 1, dtype=np.int32))
    with pytest.raises(ValueError, match="one entry per index"):
        ember_xla.embedding_bag(TABLE, IDS, weights=WEIGHTS[:, :2])
    with pytest.raises(ValueError, match="1-D or 2-D"):
        ember_xla.embedding_bag(TABLE, IDS[None])


def _order_case(wrap: bool, itype) -> tuple[np.ndarray, np.ndarray]:
    """A table of mixed magnitudes (so orders give different bits) and bags of 28 rows (XLA's
    own loop vectorizes bags of 25-32 f32 rows), no NaN row to hide the order."""
    r = np.random.default_rng(5)
    t = (r.standard_normal((N, D)) * np.exp2(r.integers(-8, 9, (N, D)))).astype(np.float32)
    ids = r.integers(-N if wrap else 0, N, (B, 28)).astype(itype)
    return t, ids


# (mode, wrap, ids, the same bag in jnp, whether the rule reproduces XLA's order for it)
ORDER_CASES = [
    ("clip", True, np.int32, lambda t, i: t[i].sum(1), True),               # vector8
    ("fill", True, np.int32, lambda t, i: jnp.take(t, i, axis=0).sum(1), True),
    ("clip", False, np.int32,                                               # bare clamp
     lambda t, i: jnp.take(t, i, axis=0, mode="clip").sum(1), False),
    ("clip", True, np.int64, lambda t, i: t[i].sum(1), False),              # s64 ids
]


def _vector8(t: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The kernel's "vector8" order (XLA's for wrapped s32 ids), called directly."""
    call = jax.ffi.ffi_call("ember.padded_bag", jax.ShapeDtypeStruct((B, D), jnp.float32))
    return np.asarray(call(t, ids, combiner="sum", index_mode="clip", wrap_negative=False,
                           weighted=False, init=0.0, index_bits=np.int64(64),
                           sum_order="vector8", row_type=""))


@pytest.mark.parametrize("mode, wrap, itype, jnp_bag, reproduced", ORDER_CASES)
def test_padded_bag_order_is_the_rewrites_rule(mode, wrap, itype, jnp_bag, reproduced):
    """embedding_bag's padded form asks the rewrite's order rule about the whole lookup (index
    type, mode, wrap): where XLA's order is reproduced the call gives XLA's bits for the same
    bag in jnp; elsewhere it adds the rows one after the other, as documented. The bare clamp
    (jnp.take(mode="clip")) of 25-32 rows was given "vector8", which is not XLA's order."""
    with jax.enable_x64(itype == np.int64):
        t, ids = _order_case(wrap, itype)
        got = np.asarray(ember_xla.embedding_bag(t, ids, mode=mode, wrap_negative=wrap))
        want = np.asarray(jax.jit(jnp_bag)(t, ids))
    rows = t[np.where(ids < 0, ids + N, ids) if wrap else ids]
    sequential = _sequential(rows, "sum")
    if reproduced:
        assert not np.array_equal(want, sequential)  # the data tells the two orders apart
        assert np.array_equal(got, want)
    else:
        assert np.array_equal(got, sequential)
    if mode == "clip" and not wrap:
        assert not np.array_equal(_vector8(t, ids), want)
