"""Model zoo of embedding idioms, as unmodified JAX / TensorFlow code exports them.

Each idiom is a small function written the way real models write it (no ember code).
``hlo(name)`` exports its unoptimized HLO (stage 'hlo'), ``inputs(name, case)`` makes
entry-parameter values, ``reference(name, args)`` runs the original framework function.
See docs/IDIOMS.md for the HLO each idiom produces.

Importing this module imports neither JAX nor TensorFlow: builders import them lazily.

Conventions:
- Shapes come from each idiom's defaults, overridable by keyword (``hlo(name, N=100)``);
  pass the same keywords to ``inputs``.
- ``case="random"``: in-range indices and ids. ``case="edge"``: negative indices (wrapping
  and not), indices >= N, duplicates, segment ids < 0 and >= S, empty segments / bags,
  all-masked padded bags, zero and negative weights. Idioms declared with
  ``indices_are_sorted=True`` always get sorted segment ids (out-of-range ones at the ends).
- ``tolerance`` 0.0: a rewrite must be bitwise equal to the original module (NaN == NaN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Idiom:
    name: str  # e.g. "jax_take_fill_segment_sum"
    framework: str  # "jax" | "tf"
    expected_clusters: int
    kind: str  # "segment_reduce" | "padded_bag" | "offsets_bag"  (see docs/CUSTOM_CALL.md)
    combiner: str  # sum | mean | max | min | sqrt_n
    tolerance: float  # 0.0 = must be bitwise equal; else why in a comment


@dataclass(frozen=True)
class _Spec:
    idiom: Idiom
    defaults: dict[str, Any]
    build: Callable  # (shape) -> (fn, example_args)
    make_inputs: Callable  # (shape, case, rng) -> list[np.ndarray]
    x64: bool = False
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


_SPECS: dict[str, _Spec] = {}

# Tolerances (relative and absolute) of an idiom's original module on XLA:CPU against the
# framework's own run (test_idiom_models.py), where they compute differently:
# - _TOL_DIV: XLA:CPU as compiled by jaxlib 0.10.2 rewrites `x / broadcast(c)` into
#   `x * broadcast(1 / c)` (algebraic simplifier), which is up to 1 ulp off an exact divide;
#   TF's own XLA:CPU run divides exactly.
# - _TOL_REDUCE: TF's runtime and XLA:CPU add a bag's rows in different orders.
# - _TOL_F16_REDUCE: the same for f16 sums, rounded once to f16 (1 f16 ulp ~ 1e-3 relative).
# The rewritten module against the original, both on XLA:CPU, is compared bit for bit for every
# idiom (test_rewrite_idioms.py): the kernels divide as XLA's simplifier does and add a bag's
# rows in XLA:CPU's order (native/padded_order.py).
_TOL_DIV = 1e-6
_TOL_REDUCE = 1e-5
_TOL_F16_REDUCE = 2e-3


def _register(idiom: Idiom, defaults, build, make_inputs, *, x64=False, notes=""):
    assert idiom.name not in _SPECS, idiom.name
    _SPECS[idiom.name] = _Spec(idiom, dict(defaults), build, make_inputs, x64, notes)


# --------------------------------------------------------------------------------------
# input helpers (numpy only)
# --------------------------------------------------------------------------------------

_KERAS_TABLE_SEED = 1234  # Keras tables are layer variables: a fixed, known value


def _np_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _table(rng, n, d, dtype="float32"):
    return rng.standard_normal((n, d)).astype(np.float32).astype(_np_dtype(dtype))


def _lookup_indices(rng, n, length, case, dtype="int32", *, wrap=True):
    """Random indices in [0, n); for 'edge' a mix of duplicates, negatives and >= n."""
    idx = rng.integers(0, n, size=length)
    if case == "edge":
        special = [0, 0, n - 1, n - 1, -1, -n, n, n + 7, -n - 1, 2 * n]
        if not wrap:  # still out of range, but keeps the pattern simple to read
            special = [0, 0, n - 1, n - 1, -1, n, n + 7, -n - 1]
        k = min(len(special), length)
        pos = rng.permutation(length)[:k]
        idx[pos] = special[:k]
    return idx.astype(dtype)


def _segment_ids(rng, s, length, case, dtype="int32", *, sorted_=False):
    """Segment ids in [0, s); 'edge' leaves segment 1 empty and adds ids -1 and s, s+3."""
    if case == "edge":
        ids = rng.choice([v for v in range(s) if v != 1] or [0], size=length)
        bad = [-1, s, s + 3]
        pos = rng.permutation(length)[: min(3, length)]
        ids[pos] = bad[: len(pos)]
    else:
        ids = rng.integers(0, s, size=length)
    if sorted_:
        ids = np.sort(ids)
    return ids.astype(dtype)


def _bag_ids(rng, n, b, p, case, dtype="int32"):
    ids = rng.integers(0, n, size=(b, p))
    if case == "edge":
        flat = ids.reshape(-1)
        special = [-1, n, n + 5, -n, -n - 1, 0, 0]
        pos = rng.permutation(flat.size)[: min(len(special), flat.size)]
        flat[pos] = special[: len(pos)]
        ids = flat.reshape(b, p)
        ids[0, :] = ids[0, 0]  # duplicates within one bag
    return ids.astype(dtype)


def _bag_mask(rng, b, p, case):
    mask = rng.random((b, p)) < 0.7
    if case == "edge":
        mask[0, :] = True
        if b > 1:
            mask[1, :] = False  # all-masked bag
    else:
        mask[:, 0] = True
    return mask


def _weights(rng, shape, case, dtype="float32"):
    w = rng.standard_normal(shape).astype(np.float32)
    if case == "edge":
        flat = w.reshape(-1)
        flat[: min(2, flat.size)] = 0.0
    return w.astype(_np_dtype(dtype))


def _splits(rng, b, length, case):
    """Row splits [b+1], first 0 and last length; 'edge' has empty bags (first, middle)."""
    if case == "edge":
        inner = np.sort(rng.integers(0, length + 1, size=b - 1))
        inner[0] = 0  # first bag empty
        if b > 3:
            inner[2] = inner[1]  # another empty bag
        return np.concatenate([[0], inner, [length]]).astype(np.int32)
    inner = np.sort(rng.integers(0, length + 1, size=b - 1))
    return np.concatenate([[0], inner, [length]]).astype(np.int32)


# --------------------------------------------------------------------------------------
# JAX idioms
# --------------------------------------------------------------------------------------


def _jx():
    import jax
    import jax.numpy as jnp

    return jax, jnp


def _seg_inputs(dtype="float32", idx_dtype="int32", sorted_=False, wrap=True, weighted=False):
    def make(sh, case, rng):
        t = _table(rng, sh["N"], sh["D"], dtype)
        i = _lookup_indices(rng, sh["N"], sh["L"], case, idx_dtype, wrap=wrap)
        s = _segment_ids(rng, sh["S"], sh["L"], case, idx_dtype, sorted_=sorted_)
        out = [t, i, s]
        if weighted:
            out.append(_weights(rng, (sh["L"],), case, dtype))
        return out

    return make


def _seg_example(sh, dtype="float32", idx_dtype="int32", weighted=False):
    rng = np.random.default_rng(0)
    return _seg_inputs(dtype, idx_dtype, weighted=weighted)(sh, "random", rng)


_SEG = dict(N=12, D=4, L=10, S=4)


def _jax_segment(lookup: str, reduce: str, *, sorted_=False, dtype="float32",
                 idx_dtype="int32", weighted=False):
    """lookup: take_fill | take_clip | take_wrap | at_promise | index; reduce: sum|max|min|mean."""

    def build(sh):
        jax, jnp = _jx()
        S = sh["S"]

        def look(t, i):
            if lookup == "take_fill":
                return jnp.take(t, i, axis=0)
            if lookup == "take_clip":
                return jnp.take(t, i, axis=0, mode="clip")
            if lookup == "take_wrap":
                return jnp.take(t, i, axis=0, mode="wrap")
            if lookup == "at_promise":
                return t.at[i].get(mode="promise_in_bounds")
            if lookup == "index":
                return t[i]
            raise ValueError(lookup)

        def one(rows, s, r):
            if r == "sum":
                return jax.ops.segment_sum(rows, s, num_segments=S, indices_are_sorted=sorted_)
            if r == "max":
                return jax.ops.segment_max(rows, s, num_segments=S, indices_are_sorted=sorted_)
            if r == "min":
                return jax.ops.segment_min(rows, s, num_segments=S, indices_are_sorted=sorted_)
            if r == "mean":
                total = jax.ops.segment_sum(rows, s, num_segments=S, indices_are_sorted=sorted_)
                count = jax.ops.segment_sum(jnp.ones_like(s, dtype=rows.dtype), s,
                                            num_segments=S, indices_are_sorted=sorted_)
                return total / jnp.maximum(count, 1)[:, None]
            raise ValueError(r)

        def f(t, i, s, *w):
            rows = look(t, i)
            if w:
                rows = rows * w[0][:, None]
            # "sum+max": several reductions of the same rows (multi-output), side by side
            parts = [one(rows, s, r) for r in reduce.split("+")]
            return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)

        return f, _seg_example(sh, dtype, idx_dtype, weighted)

    return build


def _reg_jax_segment(name, lookup, reduce, *, sorted_=False, dtype="float32",
                     idx_dtype="int32", weighted=False, tolerance=0.0, notes=""):
    _register(
        Idiom(name, "jax", 1, "segment_reduce", reduce, tolerance),
        _SEG,
        _jax_segment(lookup, reduce, sorted_=sorted_, dtype=dtype, idx_dtype=idx_dtype,
                     weighted=weighted),
        _seg_inputs(dtype, idx_dtype, sorted_=sorted_, weighted=weighted),
        x64=idx_dtype == "int64",
        notes=notes,
    )


_reg_jax_segment("jax_take_fill_segment_sum", "take_fill", "sum")
_reg_jax_segment("jax_take_fill_segment_sum_sorted", "take_fill", "sum", sorted_=True)
_reg_jax_segment("jax_take_clip_segment_sum", "take_clip", "sum")
_reg_jax_segment("jax_take_clip_segment_sum_sorted", "take_clip", "sum", sorted_=True)
_reg_jax_segment("jax_take_wrap_segment_sum", "take_wrap", "sum",
                 notes="mode='wrap': rem/select index chain, then a plain gather")
_reg_jax_segment("jax_at_get_promise_segment_max", "at_promise", "max",
                 notes="jnp.take has no 'promise_in_bounds': use x.at[i].get(mode=...)")
_reg_jax_segment("jax_index_segment_min", "index", "min")
_reg_jax_segment("jax_index_segment_max_sorted", "index", "max", sorted_=True)
_reg_jax_segment("jax_take_fill_segment_mean", "take_fill", "mean", tolerance=_TOL_DIV)
_reg_jax_segment("jax_index_weighted_segment_sum", "index", "sum", weighted=True)
# multi-output: one gather feeding several reductions -> one ember.multi_segment_reduce call
_register(Idiom("jax_index_segment_sum_and_max", "jax", 2, "segment_reduce", "sum", 0.0), _SEG,
          _jax_segment("index", "sum+max"), _seg_inputs(),
          notes="t[i] feeding segment_sum and segment_max over the same segment ids")
_register(Idiom("jax_index_weighted_segment_sum_and_max", "jax", 2, "segment_reduce", "sum",
                0.0), _SEG, _jax_segment("index", "sum+max", weighted=True),
          _seg_inputs(weighted=True),
          notes="weighted messages t[i] * w[:, None] feeding segment_sum and segment_max")
_register(Idiom("jax_take_wrap_segment_mean_max_min", "jax", 3, "segment_reduce", "mean", 0.0),
          _SEG, _jax_segment("take_wrap", "mean+max+min"), _seg_inputs(),
          notes="PNA-style aggregators over jnp.take(mode='wrap') rows: the floor-mod is "
                "copied per reduction by split-shared-lookup; the count reads no rows")
_register(Idiom("jax_take_fill_segment_sum_and_min_sorted", "jax", 2, "segment_reduce", "sum",
                0.0), _SEG, _jax_segment("take_fill", "sum+min", sorted_=True),
          _seg_inputs(sorted_=True), notes="fill-mode lookup, sorted ids (folded plan)")
_reg_jax_segment("jax_take_fill_segment_sum_bf16", "take_fill", "sum", dtype="bfloat16")
_reg_jax_segment("jax_index_segment_max_f16", "index", "max", dtype="float16")
_reg_jax_segment("jax_take_fill_segment_sum_s64", "take_fill", "sum", idx_dtype="int64")
_reg_jax_segment("jax_index_segment_mean_s64", "index", "mean", idx_dtype="int64",
                 tolerance=_TOL_DIV)


# Segment ids as a closure constant.  (segment_sum *without* num_segments cannot be jitted in
# jax 0.10.2 even for constant ids: np.max of the staged constant raises
# ConcretizationTypeError, so num_segments is always explicit in exported HLO.)
def _build_const_ids(sh):
    jax, jnp = _jx()
    seg = _const_segment_ids(sh)
    S = sh["S"]

    def f(t, i):
        return jax.ops.segment_sum(t[i], seg, num_segments=S)

    rng = np.random.default_rng(0)
    return f, [_table(rng, sh["N"], sh["D"]), _lookup_indices(rng, sh["N"], sh["L"], "random")]


def _const_segment_ids(sh):
    # deterministic, unsorted, segment 1 empty, max id S-1 so num_segments == S
    L, S = sh["L"], sh["S"]
    ids = np.array([(3 * k) % S for k in range(L)], np.int32)
    ids[ids == 1] = 0
    ids[-1] = S - 1
    return ids


def _const_ids_inputs(sh, case, rng):
    return [_table(rng, sh["N"], sh["D"]), _lookup_indices(rng, sh["N"], sh["L"], case)]


_register(Idiom("jax_index_segment_sum_const_ids", "jax", 1, "segment_reduce", "sum", 0.0),
          _SEG, _build_const_ids, _const_ids_inputs,
          notes="segment ids are a baked s32 constant")


# padded bags: ids [B, P] -> t[ids] [B, P, D] -> reduce over axis 1
_BAG = dict(N=12, D=4, B=4, P=5)


def _bag_inputs(dtype="float32", idx_dtype="int32", mask=False):
    def make(sh, case, rng):
        out = [_table(rng, sh["N"], sh["D"], dtype),
               _bag_ids(rng, sh["N"], sh["B"], sh["P"], case, idx_dtype)]
        if mask:
            out.append(_bag_mask(rng, sh["B"], sh["P"], case))
        return out

    return make


def _jax_bag(reduce: str, *, mask=False, dtype="float32", lookup="index"):
    def build(sh):
        jax, jnp = _jx()

        def look(t, ids):
            if lookup == "flax_embed":
                # flax.linen.Embed.__call__ (flax 0.12.8), param_dtype == dtype == None:
                #   (embedding,) = promote_dtype(self.embedding, dtype=None, inexact=False)
                #   return jnp.take(embedding, inputs, axis=0)
                if not jnp.issubdtype(ids.dtype, jnp.integer):
                    raise ValueError("Input type must be an integer or unsigned integer.")
                embedding = jnp.asarray(t)
                return jnp.take(embedding, ids, axis=0)
            return t[ids]

        def f(t, ids, *m):
            rows = look(t, ids)  # [B, P, D]
            if not m:
                if reduce == "sum":
                    return rows.sum(axis=1)
                if reduce == "mean":
                    return rows.mean(axis=1)
                if reduce == "max":
                    return rows.max(axis=1)
                raise ValueError(reduce)
            msk = m[0]
            if reduce == "sum":
                return (rows * msk[..., None]).sum(axis=1)
            if reduce == "mean":
                total = (rows * msk[..., None]).sum(axis=1)
                count = msk.sum(axis=1, keepdims=True).astype(rows.dtype)
                return total / jnp.maximum(count, 1)
            if reduce == "max":
                return jnp.where(msk[..., None], rows, -jnp.inf).max(axis=1)
            raise ValueError(reduce)

        rng = np.random.default_rng(0)
        return f, _bag_inputs(dtype, mask=mask)(sh, "random", rng)

    return build


def _reg_jax_bag(name, reduce, *, mask=False, dtype="float32", lookup="index", notes=""):
    if reduce == "max":
        tol = 0.0  # order-independent
    elif dtype == "float16":
        tol = _TOL_F16_REDUCE
    else:
        tol = _TOL_REDUCE  # (mean: also _TOL_DIV, which is smaller)
    _register(Idiom(name, "jax", 1, "padded_bag", reduce, tol), _BAG,
              _jax_bag(reduce, mask=mask, dtype=dtype, lookup=lookup),
              _bag_inputs(dtype, mask=mask), notes=notes)


_reg_jax_bag("jax_padded_bag_sum", "sum")
_reg_jax_bag("jax_padded_bag_mean", "mean")
_reg_jax_bag("jax_padded_bag_max", "max")
_reg_jax_bag("jax_padded_bag_sum_mask", "sum", mask=True,
             notes="rows * convert(mask): a weighted bag with weights = mask")
_reg_jax_bag("jax_padded_bag_mean_mask", "mean", mask=True)
_reg_jax_bag("jax_padded_bag_max_mask", "max", mask=True,
             notes="select(mask, rows, -inf) then reduce max")
_reg_jax_bag("jax_padded_bag_sum_f16", "sum", dtype="float16")
_reg_jax_bag("jax_flax_embed_bag_mean", "mean", lookup="flax_embed",
             notes="flax.linen.Embed lookup reproduced without flax; HLO checked equal")


# GNN message passing: x[src] -> segment_{sum,mean,max} over dst, num_segments = nodes
_GNN = dict(V=6, D=4, E=12)


def _gnn_build(reduce):
    def build(sh):
        jax, jnp = _jx()
        V = sh["V"]

        def f(x, src, dst):
            msg = x[src]
            if reduce == "sum":
                return jax.ops.segment_sum(msg, dst, num_segments=V)
            if reduce == "max":
                return jax.ops.segment_max(msg, dst, num_segments=V)
            if reduce == "mean":
                total = jax.ops.segment_sum(msg, dst, num_segments=V)
                deg = jax.ops.segment_sum(jnp.ones_like(dst, dtype=x.dtype), dst, num_segments=V)
                return total / jnp.maximum(deg, 1)[:, None]
            raise ValueError(reduce)

        return f, _gnn_inputs(sh, "random", np.random.default_rng(0))

    return build


def _gnn_inputs(sh, case, rng):
    V, E = sh["V"], sh["E"]
    x = _table(rng, V, sh["D"])
    src = _lookup_indices(rng, V, E, case)
    dst = _segment_ids(rng, V, E, case)
    return [x, src, dst]


for _r in ("sum", "mean", "max"):
    _register(Idiom(f"jax_gnn_segment_{_r}", "jax", 1, "segment_reduce", _r,
                    _TOL_DIV if _r == "mean" else 0.0), _GNN,
              _gnn_build(_r), _gnn_inputs)


# DLRM-like: 26 tables (same D, different N), one ids array [B, 26, P], bag-sum each table,
# concatenate, dense layer.
_MANY = dict(T=26, D=16, B=3, P=4, H=8, N0=8)


def _many_sizes(sh):
    return [sh["N0"] + 3 * k for k in range(sh["T"])]


def _many_inputs(sh, case, rng):
    sizes = _many_sizes(sh)
    tables = [_table(rng, n, sh["D"]) for n in sizes]
    ids = np.stack([_bag_ids(rng, n, sh["B"], sh["P"], case) for n in sizes], axis=1)
    w = (rng.standard_normal((sh["T"] * sh["D"], sh["H"])) * 0.1).astype(np.float32)
    return [*tables, ids, w]


def _many_build(sh):
    jax, jnp = _jx()
    T = sh["T"]

    def f(*args):
        tables, ids, w = args[:T], args[T], args[T + 1]
        pooled = [tables[k][ids[:, k, :]].sum(axis=1) for k in range(T)]
        return jnp.concatenate(pooled, axis=1) @ w

    return f, _many_inputs(sh, "random", np.random.default_rng(0))


_register(Idiom("jax_many_tables_bag_sum_dense", "jax", 26, "padded_bag", "sum", _TOL_REDUCE),
          _MANY, _many_build, _many_inputs,
          notes="entry params: 26 tables, ids[B,26,P] (sliced per table), dense W")


# two features' ids concatenated into one lookup, each pooled from its slice of the rows
_SLICES = dict(N=12, D=4, B=4, P=5, Q=3)


def _slices_inputs(sh, case, rng):
    return [_table(rng, sh["N"], sh["D"]), _bag_ids(rng, sh["N"], sh["B"], sh["P"], case),
            _bag_ids(rng, sh["N"], sh["B"], sh["Q"], case)]


def _slices_build(sh):
    _, jnp = _jx()
    P = sh["P"]

    def f(t, a, b):
        rows = t[jnp.concatenate([a, b], axis=1)]
        return jnp.concatenate([rows[:, :P].sum(axis=1), rows[:, P:].sum(axis=1)], axis=1)

    return f, _slices_inputs(sh, "random", np.random.default_rng(0))


_register(Idiom("jax_concat_ids_slices_bag_sum", "jax", 2, "padded_bag", "sum", _TOL_REDUCE),
          _SLICES, _slices_build, _slices_inputs,
          notes="one lookup of [a | b], rows[:, :P] and rows[:, P:] summed apart")


# offsets -> segment ids with jnp.searchsorted (default method='scan': a while loop)
_OFF = dict(N=12, D=4, L=10, B=4)


def _offsets_inputs(sh, case, rng):
    return [_table(rng, sh["N"], sh["D"]), _lookup_indices(rng, sh["N"], sh["L"], case),
            _splits(rng, sh["B"], sh["L"], case)]


def _jax_offsets_build(sh):
    jax, jnp = _jx()
    B, L = sh["B"], sh["L"]

    def f(t, i, offsets):
        seg = jnp.searchsorted(offsets, jnp.arange(L, dtype=offsets.dtype), side="right") - 1
        return jax.ops.segment_sum(t[i], seg, num_segments=B, indices_are_sorted=True)

    return f, _offsets_inputs(sh, "random", np.random.default_rng(0))


_register(Idiom("jax_offsets_searchsorted_segment_sum", "jax", 1, "segment_reduce", "sum", 0.0),
          _OFF, _jax_offsets_build, _offsets_inputs,
          notes="segment ids computed by a while loop (searchsorted scan): opaque ids")


# --------------------------------------------------------------------------------------
# TensorFlow idioms (tf.function(jit_compile=True))
# --------------------------------------------------------------------------------------


def _tf():
    import tensorflow as tf

    return tf


def _tf_segment(reduce: str, *, lookup="gather", weighted=False, idx_dtype="int32"):
    def build(sh):
        tf = _tf()
        S = sh["S"]
        fns = {"sum": tf.math.unsorted_segment_sum, "mean": tf.math.unsorted_segment_mean,
               "max": tf.math.unsorted_segment_max, "min": tf.math.unsorted_segment_min,
               "sqrt_n": tf.math.unsorted_segment_sqrt_n}

        def f(t, i, s, *w):
            rows = tf.gather(t, i) if lookup == "gather" else tf.nn.embedding_lookup(t, i)
            if w:
                rows = rows * w[0][:, None]
            # "sum+max": several reductions of the same rows (multi-output), side by side
            parts = [fns[r](rows, s, num_segments=S) for r in reduce.split("+")]
            return parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)

        return f, _seg_example(sh, "float32", idx_dtype, weighted)

    return build


def _reg_tf_segment(name, reduce, **kw):
    tol = _TOL_DIV if reduce in ("mean", "sqrt_n") else 0.0
    _register(Idiom(name, "tf", 1, "segment_reduce", reduce, tol), _SEG, _tf_segment(reduce, **kw),
              _seg_inputs(idx_dtype=kw.get("idx_dtype", "int32"),
                          weighted=kw.get("weighted", False)))


_reg_tf_segment("tf_gather_unsorted_segment_sum", "sum")
_reg_tf_segment("tf_embedding_lookup_unsorted_segment_sum", "sum", lookup="embedding_lookup")
_reg_tf_segment("tf_gather_unsorted_segment_mean", "mean")
_reg_tf_segment("tf_embedding_lookup_unsorted_segment_max", "max", lookup="embedding_lookup")
_reg_tf_segment("tf_gather_unsorted_segment_min", "min")
_reg_tf_segment("tf_gather_unsorted_segment_sqrt_n", "sqrt_n")
_reg_tf_segment("tf_gather_weighted_unsorted_segment_sum", "sum", weighted=True)
_reg_tf_segment("tf_gather_unsorted_segment_sum_s64", "sum", idx_dtype="int64")
# multi-output: one tf.gather feeding unsorted_segment_sum and _max (TF's lowest-finite init)
_register(Idiom("tf_gather_unsorted_segment_sum_and_max", "tf", 2, "segment_reduce", "sum", 0.0),
          _SEG, _tf_segment("sum+max"), _seg_inputs())


# Keras 3 (tf.keras is Keras 3 here) Embedding layer + reduce over the bag axis.
def _keras_table(sh):
    return _table(np.random.default_rng(_KERAS_TABLE_SEED), sh["N"], sh["D"])


def _keras_build(reduce, idx_dtype):
    def build(sh):
        tf = _tf()
        import keras

        emb = keras.layers.Embedding(
            sh["N"], sh["D"], embeddings_initializer=keras.initializers.Constant(_keras_table(sh)))

        def f(ids):
            rows = emb(ids)
            return tf.reduce_sum(rows, axis=1) if reduce == "sum" else tf.reduce_mean(rows, axis=1)

        rng = np.random.default_rng(0)
        return f, [_bag_ids(rng, sh["N"], sh["B"], sh["P"], "random", idx_dtype)]

    return build


def _keras_inputs(idx_dtype):
    def make(sh, case, rng):
        # entry params: ids, then the layer's variable (its real value)
        return [_bag_ids(rng, sh["N"], sh["B"], sh["P"], case, idx_dtype), _keras_table(sh)]

    return make


_register(Idiom("tf_keras_embedding_bag_sum", "tf", 1, "padded_bag", "sum", _TOL_REDUCE), _BAG,
          _keras_build("sum", "int32"), _keras_inputs("int32"),
          notes="table variable is entry parameter 1 (after ids)")
_register(Idiom("tf_keras_embedding_bag_mean_s64", "tf", 1, "padded_bag", "mean", _TOL_REDUCE),
          _BAG,
          _keras_build("mean", "int64"), _keras_inputs("int64"),
          notes="table variable is entry parameter 1 (after ids)")


# Ragged bags.  (a) RaggedTensor.from_row_splits + value_rowids: XLA needs the row splits at
# compile time, so TF bakes them into the HLO as constants (they are NOT an entry parameter,
# even when passed as a tf.function argument).  (b) searchsorted over splits: dynamic splits.
_RAG = dict(N=12, D=4, L=10, B=4)


def _rag_splits(sh):
    return _splits(np.random.default_rng(7), sh["B"], sh["L"], "edge")  # has empty bags


def _tf_ragged_build(sh):
    tf = _tf()
    splits = _rag_splits(sh)

    def f(t, ids):
        rt = tf.RaggedTensor.from_row_splits(ids, tf.constant(splits))
        return tf.math.unsorted_segment_sum(tf.gather(t, rt.values), rt.value_rowids(),
                                            num_segments=rt.nrows())

    rng = np.random.default_rng(0)
    return f, [_table(rng, sh["N"], sh["D"]), _lookup_indices(rng, sh["N"], sh["L"], "random")]


def _tf_ragged_inputs(sh, case, rng):
    return [_table(rng, sh["N"], sh["D"]), _lookup_indices(rng, sh["N"], sh["L"], case)]


def _tf_ragged_mapflat_build(sh):
    tf = _tf()
    splits = _rag_splits(sh)

    def f(t, ids):
        rt = tf.RaggedTensor.from_row_splits(ids, tf.constant(splits))
        return tf.reduce_sum(tf.ragged.map_flat_values(tf.gather, t, rt), axis=1)

    rng = np.random.default_rng(0)
    return f, [_table(rng, sh["N"], sh["D"]), _lookup_indices(rng, sh["N"], sh["L"], "random")]


def _tf_searchsorted_build(sh):
    tf = _tf()

    def f(t, ids, splits):
        pos = tf.range(tf.shape(ids)[0], dtype=splits.dtype)
        seg = tf.searchsorted(splits, pos, side="right") - 1
        return tf.math.unsorted_segment_sum(tf.gather(t, ids), seg,
                                            num_segments=tf.shape(splits)[0] - 1)

    return f, _offsets_inputs(sh, "random", np.random.default_rng(0))


_register(Idiom("tf_ragged_value_rowids_segment_sum", "tf", 1, "segment_reduce", "sum", 0.0),
          _RAG, _tf_ragged_build, _tf_ragged_inputs,
          notes="splits baked as constants; segment ids from a parameter-free subgraph")
_register(Idiom("tf_ragged_map_flat_values_reduce_sum", "tf", 1, "segment_reduce", "sum", 0.0),
          _RAG, _tf_ragged_mapflat_build, _tf_ragged_inputs,
          notes="splits baked as constants; segment ids from a parameter-free subgraph")
_register(Idiom("tf_offsets_searchsorted_segment_sum", "tf", 1, "offsets_bag", "sum", 0.0),
          _OFF, _tf_searchsorted_build, _offsets_inputs,
          notes="UpperBound lowers to compare(GE)+convert+reduce(add); minus 1")


# --------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------

IDIOMS: list[Idiom] = [s.idiom for s in _SPECS.values()]


def idiom(name: str) -> Idiom:
    return _SPECS[name].idiom


def notes(name: str) -> str:
    return _SPECS[name].notes


def _shape(name: str, shape_kw) -> dict[str, Any]:
    spec = _SPECS[name]
    unknown = set(shape_kw) - set(spec.defaults)
    if unknown:
        raise TypeError(f"{name}: unknown shape keywords {sorted(unknown)}")
    return {**spec.defaults, **shape_kw}


class _X64:
    """jax.enable_x64(True) for s64 idioms, a no-op otherwise."""

    def __init__(self, on: bool):
        self.on = on
        self.cm = None

    def __enter__(self):
        if self.on:
            import jax

            self.cm = jax.enable_x64(True)
            self.cm.__enter__()

    def __exit__(self, *exc):
        if self.cm is not None:
            return self.cm.__exit__(*exc)
        return False


def _tf_function(name, sh):
    tf = _tf()
    fn, example = _SPECS[name].build(sh)
    return tf.function(fn, jit_compile=True), [tf.constant(a) for a in example]


def hlo(name: str, **shape_kw) -> tuple[bytes, str]:
    """(HloModuleProto bytes, HLO text) of the unoptimized module ('hlo' stage)."""
    spec = _SPECS[name]
    sh = _shape(name, shape_kw)
    if spec.idiom.framework == "jax":
        import jax

        with _X64(spec.x64):
            fn, example = spec.build(sh)
            comp = jax.jit(fn).lower(*example).compiler_ir("hlo")
            return comp.as_serialized_hlo_module_proto(), comp.as_hlo_text()
    f, args = _tf_function(name, sh)
    ir = f.experimental_get_compiler_ir(*args)
    return ir(stage="hlo_serialized"), ir(stage="hlo")


def inputs(name: str, case: str = "random", seed: int = 0, **shape_kw) -> list[np.ndarray]:
    """Entry-parameter values, in entry-parameter order."""
    if case not in ("random", "edge"):
        raise ValueError(case)
    spec = _SPECS[name]
    return spec.make_inputs(_shape(name, shape_kw), case, np.random.default_rng(seed))


def reference(name: str, args: list[np.ndarray], **shape_kw) -> list[np.ndarray]:
    """Run the original framework function (jax.jit / tf.function(jit_compile=True))."""
    spec = _SPECS[name]
    sh = _shape(name, shape_kw)
    if spec.idiom.framework == "jax":
        import jax

        with _X64(spec.x64):
            fn, _ = spec.build(sh)
            return [np.asarray(jax.jit(fn)(*args))]
    f, example = _tf_function(name, sh)
    n_user = len(example)  # captured variables (Keras) follow the user inputs
    return [f(*args[:n_user]).numpy()]


def write_fixtures(directory=None) -> list[str]:
    """Write every idiom's unoptimized HLO text (default shapes) to fixtures/<name>.hlo."""
    import pathlib

    out = pathlib.Path(directory or pathlib.Path(__file__).parent / "fixtures")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for it in IDIOMS:
        _, text = hlo(it.name)
        (out / f"{it.name}.hlo").write_text(text)
        written.append(it.name)
    return written


if __name__ == "__main__":  # python tests/rewrites/idiom_models.py  -> regenerate fixtures
    print("\n".join(write_fixtures()))
