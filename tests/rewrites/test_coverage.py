"""The coverage audit: a gather whose rows reach a reduction no pattern roots at (here a
reduce-window, and a scatter inside an optimized module's fusion) is reported, not skipped;
a gather that reaches no reduction is not."""

from __future__ import annotations

import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.coverage import lookup_reductions
from ember_xla.rewrites.pipeline import rewrite_module
from ember_xla.rewrites.row_reduction import within_rows


def _args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((10, 4)).astype(np.float32), np.array([1, 5, 2, 9], np.int32)]


def test_reduce_window_over_rows_is_reported():
    import jax

    def f(t, i):
        return jax.lax.reduce_window(t[i], 0.0, jax.lax.add, (2, 1), (1, 1), "VALID")

    m = from_jax(f, *_args()).module
    assert [r.opcode for _, r in lookup_reductions(m)] == ["reduce-window"]
    r = rewrite_module(m)
    assert not r.clusters
    assert [n["pattern"] for n in r.near_misses] == ["coverage"]
    assert "reduce-window" in r.near_misses[0]["reason"]


def test_optimized_fusion_scatter_is_reported():
    import jax

    from ember_xla.hlo_import.proto import module_from_proto

    def f(t, i, s):
        return jax.ops.segment_sum(t[i], s, num_segments=3)

    args = _args() + [np.array([0, 2, 2, 1], np.int32)]
    compiled = jax.jit(f).lower(*args).compile()
    proto = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    r = rewrite_module(module_from_proto(proto, "opt"))
    assert r.near_misses and all(n["reason"] for n in r.near_misses)


def test_gather_without_reduction_is_not_a_miss():
    m = from_jax(lambda t, i: t[i] * 2.0, *_args()).module
    assert lookup_reductions(m) == []
    assert rewrite_module(m).near_misses == []


def _token_layer_norm(t, p, i):
    """A token embedding plus positions, layer-normed over its features (a transformer's
    input): every reduction is within one token's row."""
    import jax.numpy as jnp

    x = jnp.take(t, i, axis=0) + p[None]
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5), jnp.sqrt((x * x).sum(-1))


def _lm_args():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((50, 8)).astype(np.float32),
            rng.standard_normal((6, 8)).astype(np.float32),
            rng.integers(0, 50, (3, 6)).astype(np.int32)]


def _float_reduces(fn) -> list:
    """The f32 reduces of ``fn``'s module as the matcher sees it (canonicalized)."""
    from ember_xla.rewrites.canonicalize import canonicalize

    m = from_jax(fn, *_lm_args()).module
    canonicalize(m)
    return [op for g in m.graphs for op in g.ops
            if op.opcode == "reduce" and op.result.type.element_type == "f32"]


def test_reductions_within_rows_are_no_bag():
    """A layer norm or a norm over each looked-up row's features is neither a near-miss nor
    an uncovered reduction, and the module is left alone."""
    from ember_xla.hlo_import.proto import module_to_proto

    assert len(_float_reduces(_token_layer_norm)) == 3
    assert all(within_rows(op) for op in _float_reduces(_token_layer_norm))
    m = from_jax(_token_layer_norm, *_lm_args()).module
    before = module_to_proto(m)
    r = rewrite_module(m)
    assert not r.clusters and r.near_misses == []
    assert module_to_proto(r.module) == before


def test_reductions_across_lookups_are_still_misses():
    """Rows whose lookups a transpose or a reshape puts in the last dim, reduced over it, are
    not within rows (the module as imported: ``t[i]`` is an inline gather), so a bag no
    pattern takes still counts as one. 8 lookups per bag of 8-wide rows: the transposed
    rows' last dim has the feature dim's size, so only the transpose tells them apart."""
    import jax.numpy as jnp

    t, _, _ = _lm_args()
    i = np.random.default_rng(2).integers(0, 50, (3, 8)).astype(np.int32)

    def f32_reduces(fn):
        m = from_jax(fn, t, i).module
        return [op for g in m.graphs for op in g.ops
                if op.opcode == "reduce" and op.result.type.element_type == "f32"]

    within = [lambda t, i: (t[i] * 2.0).sum(-1)]
    across = [lambda t, i: jnp.swapaxes(t[i] * 2.0, 1, 2).sum(-1),  # over the 8 tokens
              lambda t, i: (t[i] * 2.0).reshape(3, 64).sum(-1)]     # over tokens and D
    assert all(within_rows(op) for fn in within for op in f32_reduces(fn))
    for fn in across:
        reduces = f32_reduces(fn)
        assert reduces and not any(within_rows(op) for op in reduces)


def _tied_lm_loss(e, ids, labels):
    """A language model's loss with a tied output embedding: the label's log-probability is
    picked with take_along_axis, a gather of single elements, not of rows."""
    import jax
    import jax.numpy as jnp

    logits = jnp.take(e, ids, axis=0) @ e.T
    picked = jnp.take_along_axis(jax.nn.log_softmax(logits), labels[..., None], axis=-1)
    return -jnp.mean(picked)


def test_picked_elements_are_no_lookup():
    """take_along_axis's gather picks one element per label: neither a lookup the matcher
    names (it used to say "reads stacked tables") nor a row gather the audit follows; the
    lookup of one-wide rows ([N,1]) still reads rows."""
    from ember_xla.rewrites.lookup import picks_elements

    rng = np.random.default_rng(3)
    e = rng.standard_normal((50, 8)).astype(np.float32)
    ids, labels = (rng.integers(0, 50, 6).astype(np.int32) for _ in range(2))
    m = from_jax(_tied_lm_loss, e, ids, labels).module
    gathers = [op for g in m.graphs for op in g.ops if op.opcode == "gather"]
    assert sorted(picks_elements(op) for op in gathers) == [False, True]
    assert lookup_reductions(m) == []
    r = rewrite_module(m)
    assert not r.clusters and r.near_misses == []

    def narrow_bag(t, i):
        return t[i].sum(1)

    m = from_jax(narrow_bag, e[:, :1], ids.reshape(2, 3)).module
    assert not any(picks_elements(op) for g in m.graphs for op in g.ops)
    assert rewrite_module(m, cost_model=False).clusters


def test_weighted_sum_over_lookups_in_another_layout_is_reported():
    """An einsum of time-major rows [P,B,D] with weights [P,B] over P (B batched) is a
    weighted bag the dot-bag pattern does not take: reported, with what the pattern takes. A
    dot contracting the rows' D (a dense layer over the lookups) is no bag."""
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    t = rng.standard_normal((50, 8)).astype(np.float32)
    i = rng.integers(0, 50, (5, 3)).astype(np.int32)               # [P, B]
    w = rng.standard_normal((5, 3)).astype(np.float32)
    k = rng.standard_normal((8, 4)).astype(np.float32)

    r = rewrite_module(from_jax(lambda t, i, w: jnp.einsum("pb,pbd->bd", w, t[i]),
                                t, i, w).module)
    assert not r.clusters
    (miss,) = r.near_misses
    assert miss["pattern"] == "coverage" and "weighted sum over the lookups" in miss["reason"]

    layer = from_jax(lambda t, i, k: t[i] @ k, t, i, k).module
    assert lookup_reductions(layer) == [] and rewrite_module(layer).near_misses == []


def test_dots_contracting_the_feature_dim_after_a_transpose_are_no_bag():
    """A two-tower score ``u @ rows.T`` (the rows transposed, D first) and an attention's
    ``q @ k.T`` over looked-up keys contract D wherever the transpose put it: no bag, no
    near-miss. The same rows transposed and contracted over the lookups still are one."""
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    t = rng.standard_normal((50, 8)).astype(np.float32)
    i = rng.integers(0, 50, (6,)).astype(np.int32)
    u = rng.standard_normal((6, 8)).astype(np.float32)

    tower = from_jax(lambda t, i, u: u @ t[i].T, t, i, u).module
    assert lookup_reductions(tower) == [] and rewrite_module(tower).near_misses == []
    keys = from_jax(lambda t, i, u: jnp.einsum("qd,kd->qk", u, 2.0 * t[i]), t, i, u).module
    assert lookup_reductions(keys) == []

    w = rng.standard_normal((6, 3)).astype(np.float32)
    over_lookups = from_jax(lambda t, i, w: t[i].T @ w, t, i, w).module    # [D,L] @ [L,3]
    assert [r.opcode for _, r in lookup_reductions(over_lookups)] == ["dot"]


def _quantized_args():
    rng = np.random.default_rng(1)
    return [rng.integers(-127, 128, (50, 8)).astype(np.int8),
            rng.random(50).astype(np.float32), rng.integers(0, 50, (4, 3)).astype(np.int32)]


def test_quantized_table_bags_are_reported():
    """Bags of an int8 table's rows converted to f32 (alone, times a scale per row, or scaled
    and shifted) are lookups the kernels do not read: named near-misses, not silent."""
    import jax.numpy as jnp

    plain = from_jax(lambda q, s, i: q[i].astype(jnp.float32).sum(1), *_quantized_args())
    scaled = from_jax(lambda q, s, i: (q[i].astype(jnp.float32) * s[i][..., None]).sum(1),
                      *_quantized_args())
    affine = from_jax(lambda q, s, i: (q[i].astype(jnp.float32) * s[i][..., None]
                                       + s[i][..., None]).sum(1), *_quantized_args())
    for m in (plain.module, scaled.module, affine.module):
        assert [r.opcode for _, r in lookup_reductions(m)] == ["reduce"]
        r = rewrite_module(m)
        assert not r.clusters
        assert len(r.near_misses) == 1
        assert "s8 rows of an integer (e.g. quantized) table" in r.near_misses[0]["reason"]


def test_quantized_rows_no_pattern_roots_at_are_reported():
    import jax
    import jax.numpy as jnp

    q, _, i = _quantized_args()
    m = from_jax(lambda q, i: jax.lax.reduce_window(q[i[:, 0]].astype(jnp.float32), 0.0,
                                                    jax.lax.add, (2, 1), (1, 1), "VALID"),
                 q, i).module
    r = rewrite_module(m)
    assert [n["pattern"] for n in r.near_misses] == ["coverage"]
    assert "reduce-window" in r.near_misses[0]["reason"]
    assert "s8 rows of an integer (e.g. quantized) table" in r.near_misses[0]["reason"]


def test_integer_gathers_that_stay_integers_are_no_lookups():
    """Ids read from an index array (they feed a lookup), and integer rows summed as integers:
    no lookups of a quantized table."""
    import jax.numpy as jnp

    q, _, i = _quantized_args()
    table = np.random.default_rng(2).standard_normal((60, 4)).astype(np.float32)
    index = np.random.default_rng(3).integers(0, 60, (50, 3)).astype(np.int32)
    nested = from_jax(lambda t, x, i: t[x[i[:, 0]]].sum(1), table, index, i).module
    assert [g.operands[0].type.element_type for g, _ in lookup_reductions(nested)] == ["f32"]
    assert not any("quantized" in n["reason"] for n in rewrite_module(nested).near_misses)
    summed = from_jax(lambda q, i: q.astype(jnp.int32)[i].sum(1), q, i).module
    assert lookup_reductions(summed) == []
