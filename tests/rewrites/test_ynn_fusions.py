"""Reading XLA:CPU's YNNPACK fusions: the optimized module's text parsed into computations, the
inexact ops of a fusion by kind, and, on real compiles, which bag reduce shares a fusion with
which ops (tagged through ``metadata.op_name``) and which bags a rewrite would move them off."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites import ynn_fusions
from ember_xla.rewrites.pipeline import rewrite_module

# XLA:CPU's optimized text for sigmoid(mean(t[ids]) @ w) at [256,20,32] (trimmed)
OPTIMIZED = """\
HloModule jit_f, is_scheduled=true
%region_0.1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.9 = f32[] add(%a, %b)
}
%fused_computation (param_0.5: f32[32,64], param_1.7: f32[5120,1,32]) -> f32[256,64] {
  %param_1.7 = f32[5120,1,32]{2,1,0} parameter(1)
  %bitcast.8 = f32[256,20,32]{2,1,0} bitcast(%param_1.7), metadata={op_name="p_7"}
  %constant.4 = f32[] constant(0)
  %reduce_sum.2 = f32[256,32]{1,0} reduce(%bitcast.8, %constant.4), dimensions={1}, \
to_apply=%region_0.1, metadata={op_name="p_3" stack_frame_id=2}
  %constant.10 = f32[] constant(0.05)
  %broadcast.6 = f32[256,32]{1,0} broadcast(%constant.10), dimensions={}
  %multiply.3 = f32[256,32]{1,0} multiply(%reduce_sum.2, %broadcast.6), metadata={op_name="p_4"}
  %param_0.5 = f32[32,64]{1,0} parameter(0)
  %dot_general.0 = f32[256,64]{1,0} dot(%multiply.3, %param_0.5), lhs_contracting_dims={1}, \
rhs_contracting_dims={0}
  %add.1 = f32[256,64]{1,0} add(%dot_general.0, %multiply.3)
  ROOT %logistic.0 = f32[256,64]{1,0} logistic(%add.1), metadata={op_name="p_5"}
}
ENTRY %main.2 (t.1: f32[5000,32], w.1: f32[32,64]) -> f32[256,64] {
  %t.1 = f32[5000,32]{1,0} parameter(0)
  %w.1 = f32[32,64]{1,0} parameter(1)
  ROOT %ynn_fusion = f32[256,64]{1,0} fusion(%w.1, %t.1), kind=kCustom, \
calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
}
"""


def test_the_optimized_text_is_read_into_computations():
    comps = ynn_fusions.computations(OPTIMIZED)
    assert set(comps) == {"region_0.1", "fused_computation", "main.2"}
    red = next(i for i in comps["fused_computation"] if i.opcode == "reduce")
    assert red.operands == ["bitcast.8", "constant.4"] and red.op_name == "p_3"
    (body,) = ynn_fusions.ynn_fusion_bodies(OPTIMIZED)
    assert body == comps["fused_computation"]


def test_a_fusions_inexact_ops_by_kind():
    (body,) = ynn_fusions.ynn_fusion_bodies(OPTIMIZED)
    kinds = [(i.name, k) for i, k in ynn_fusions._kinds(body)]
    assert kinds == [("add.1", "rounded product"), ("logistic.0", "approximated")]


RNG = np.random.default_rng(0)
T = RNG.standard_normal((5000, 32)).astype(np.float32)
IDS = RNG.integers(0, 5000, (256, 20)).astype(np.int32)
W = (RNG.standard_normal((32, 64)) * 0.1).astype(np.float32)


def test_the_bags_fusion_is_read_by_name():
    """Each op is tagged in a copy; the optimized module names the bag's reduce and the
    tanh it shares a YNNPACK fusion with, by the module's own op names."""
    m = from_jax(jax.jit(lambda t, i: jnp.tanh(t[i].mean(1) @ W)), T, IDS).module
    fusions = ynn_fusions.read(m)
    (bag,) = [op.name for op in m.entry.ops if op.opcode == "reduce"]
    (tanh,) = [op.name for op in m.entry.ops if op.opcode == "tanh"]
    assert fusions is not None and fusions.bags == {bag: [tanh]}
    assert fusions.inexact == {tanh: "approximated"} and fusions.needs_trial()
    assert all("ember_ynn_probe" not in str(op.attributes.get("metadata"))
               for op in m.entry.ops)  # the module itself is not tagged


def test_a_module_without_bags_of_ynnpack_size_is_not_compiled():
    small = from_jax(jax.jit(lambda t, i: jnp.tanh(t[i].mean(1) @ W)), T, IDS[:8, :4]).module
    assert ynn_fusions.read(small) is None


def test_a_trial_that_moves_an_inexact_op_keeps_the_bag():
    """sigmoid(p @ w): rewritten, the dot reading the custom call is a YNNPACK fusion alone
    and the logistic XLA's loop, so the bag stays in XLA, named; softmax(p @ w): its exp stays
    in a YNNPACK fusion of its own, so the bag is rewritten."""
    sig = from_jax(jax.jit(lambda t, i: jax.nn.sigmoid(t[i].mean(1) @ W)), T, IDS).module
    r = rewrite_module(sig, cost_model=False)
    assert not r.clusters
    assert any("computes outside YNNPACK" in n["reason"] for n in r.near_misses)
    soft = from_jax(jax.jit(lambda t, i: jax.nn.softmax(t[i].mean(1) @ W)), T, IDS).module
    assert len(rewrite_module(soft, cost_model=False).clusters) == 1


# XLA:CPU expands a logistic inside a YNNPACK fusion; only the divide keeps the op's tag
EXPANDED = """\
%fused_computation.2 (param_0: f32[256,32]) -> f32[256,32] {
  %param_0 = f32[256,32]{1,0} parameter(0)
  %constant.1 = f32[] constant(1)
  %broadcast.1 = f32[256,32]{1,0} broadcast(%constant.1), dimensions={}
  %negate.1 = f32[256,32]{1,0} negate(%param_0)
  %exponential.1 = f32[256,32]{1,0} exponential(%negate.1)
  %add.1 = f32[256,32]{1,0} add(%broadcast.1, %exponential.1)
  ROOT %divide.4 = f32[256,32]{1,0} divide(%broadcast.1, %add.1), metadata={op_name="p_9"}
}
"""


def test_an_op_xla_made_counts_as_the_tagged_op_it_feeds():
    (body,) = ynn_fusions.computations(EXPANDED).values()
    ((exp, kind),) = ynn_fusions._kinds(body)
    assert (exp.name, kind) == ("exponential.1", "approximated")
    users = ynn_fusions._users(body)
    assert ynn_fusions._source(exp, users, {"p_9": "Sigmoid.1"}) == "Sigmoid.1"
    assert ynn_fusions._source(exp, users, {}) is None


@pytest.mark.parametrize("activation, rewritten", [("gelu", 1), ("softmax", 1), ("sigmoid", 0)])
def test_keras_pooled_dense_layers(activation, rewritten):
    """Keras Embedding -> GlobalAveragePooling1D -> Dense(64, activation), as TF compiles it:
    gelu's and softmax's inexact ops stay in a YNNPACK fusion of their own once the bag is a
    custom call (rewritten); the sigmoid moves to XLA's loop (kept, named). Every output
    bit-equal under both excess-precision settings."""
    import keras

    from ember_xla.hlo_import.tf_source import from_tf_function
    from ember_xla.runtime.execute import run_module

    keras.utils.set_random_seed(3)
    ids = keras.Input((20,), dtype="int32", batch_size=256)
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(5000, 32)(ids))
    model = keras.Model(ids, keras.layers.Dense(64, activation=activation)(pooled))
    x = np.random.default_rng(4).integers(0, 5000, (256, 20)).astype(np.int32)
    m = from_tf_function(lambda i: model(i), x)
    r = rewrite_module(m.module, cost_model=False)
    assert len(r.clusters) == rewritten, r.near_misses
    if not rewritten:
        assert any("computes outside YNNPACK" in n["reason"] for n in r.near_misses)
    free = iter([x])
    inputs = [m.bound[k] if k in m.bound else next(free)
              for k in range(len(m.module.entry.params()))]
    for opts in ({}, {"xla_allow_excess_precision": False}):
        for a, b in zip(run_module(m.module, inputs, opts), run_module(r.module, inputs, opts),
                        strict=True):
            assert a.tobytes() == b.tobytes()


# a YNNPACK fusion converting a pooled bag to bf16 and back for its dot (the pair: p_1, p_2),
# and a loop fusion rounding to f16 (p_3)
ROUNDED = """\
%fused_computation (param_0: f32[256,64], param_1: f32[64,32]) -> f32[256,32] {
  %param_0 = f32[256,64]{1,0} parameter(0)
  %convert.1 = bf16[256,64]{1,0} convert(%param_0), metadata={op_name="p_1"}
  %convert.2 = f32[256,64]{1,0} convert(%convert.1), metadata={op_name="p_2"}
  %param_1 = f32[64,32]{1,0} parameter(1)
  ROOT %dot.1 = f32[256,32]{1,0} dot(%convert.2, %param_1), lhs_contracting_dims={1}, \
rhs_contracting_dims={0}
}
%fused_computation.1 (param_0.1: f32[256,64]) -> f32[256,64] {
  %param_0.1 = f32[256,64]{1,0} parameter(0)
  %convert.3 = f16[256,64]{1,0} convert(%param_0.1), metadata={op_name="p_3"}
  ROOT %convert.4 = f32[256,64]{1,0} convert(%convert.3)
}
ENTRY %main (a: f32[256,64], w: f32[64,32]) -> (f32[256,32], f32[256,64]) {
  %a = f32[256,64]{1,0} parameter(0)
  %w = f32[64,32]{1,0} parameter(1)
  %ynn_fusion = f32[256,32]{1,0} fusion(%a, %w), kind=kCustom, calls=%fused_computation, \
backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
  %loop_fusion = f32[256,64]{1,0} fusion(%a), kind=kLoop, calls=%fused_computation.1
  ROOT %t = (f32[256,32]{1,0}, f32[256,64]{1,0}) tuple(%ynn_fusion, %loop_fusion)
}
"""


def test_how_each_rounding_is_computed_is_read_from_the_text():
    """A pair converted back within a YNNPACK fusion keeps the f32 value there; a loop
    fusion rounds; a convert no instruction carries any more was dropped by XLA."""
    names = {"p_1": "to_bf16", "p_3": "to_f16"}
    status = ynn_fusions.rounding_status(ROUNDED, names, {"to_bf16", "to_f16", "gone"})
    assert status == {"to_bf16": {"kept wide by YNNPACK"}, "to_f16": {"rounded"},
                      "gone": {"dropped"}}


def test_roundings_are_narrowing_float_converts_after_a_bag():
    m = from_jax(jax.jit(lambda t, i: (t[i].sum(1).astype(jnp.bfloat16).astype(jnp.float32),
                                       t[i].max(1).astype(jnp.int32))), T, IDS).module
    rounding = [op for op in m.entry.ops if ynn_fusions.rounds(op)]
    assert [op.result.type.element_type for op in rounding] == ["bf16"]
    found = ynn_fusions.rounding_candidates(m)
    assert list(found.values()) == [[rounding[0].name]]


N, D = 50_000, 64
T64 = RNG.standard_normal((N, D)).astype(np.float32)
IDS64 = RNG.integers(0, N, (256, 20)).astype(np.int32)
W64 = RNG.standard_normal((D, 32)).astype(np.float32)
HEADS = {
    "bf16_dense": lambda t, i, w: (t[i].sum(1).astype(jnp.bfloat16)
                                   @ w.astype(jnp.bfloat16)).astype(jnp.float32),
    "bf16_round_trip_dense": lambda t, i, w: t[i].mean(1).astype(jnp.bfloat16).astype(
        jnp.float32) @ w,
    "f16_round_trip": lambda t, i, w: t[i].sum(1).astype(jnp.float16).astype(jnp.float32)
    + w[0, 0],
}


@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("excess", [True, False])
def test_a_bag_rounded_after_it_stays_where_the_rewrite_changes_the_rounding(head, excess):
    """A pooled f32 bag rounded to bf16/f16 for what follows: XLA:CPU keeps the f32 value
    where a YNNPACK fusion converts it back (excess precision on) and rounds elsewhere, so a
    rewrite that moves the convert out of that fusion gives other bits; such a bag stays in
    XLA, named. Every rewrite is bit-equal under its setting; the bf16 dense head under the
    default is the one kept (measured: 0.30 max difference rewritten)."""
    from ember_xla.runtime.execute import run_module

    args = [T64, IDS64, W64]
    m = from_jax(jax.jit(HEADS[head]), *args).module
    r = rewrite_module(m, cost_model=False, excess_precision=excess)
    opts = {"xla_allow_excess_precision": excess}
    for a, b in zip(run_module(m, args, opts), run_module(r.module, args, opts), strict=True):
        assert a.tobytes() == b.tobytes()
    if excess and head == "bf16_dense":
        assert not r.clusters
        assert any("is rounded by" in n["reason"] for n in r.near_misses), r.near_misses


@pytest.mark.parametrize("batch, rewritten", [(8, 1), (256, 0)])
def test_flax_mixed_precision_head_over_a_bag(batch, rewritten):
    """flax ``nn.Embed`` (f32) mean-pooled into ``nn.Dense(dtype=bfloat16)`` layers, as a user
    of flax's mixed precision writes it: at B=256 XLA:CPU's YNNPACK fusion keeps the pooled
    value in f32 through its bf16 round trip, which the rewritten module would round (measured:
    other bits), so the bag stays in XLA, named; at B=8 the rounding is the same both ways and
    the bag is rewritten. Bit-equal under both settings."""
    import flax.linen as nn

    from ember_xla.runtime.execute import run_module

    class Model(nn.Module):
        @nn.compact
        def __call__(self, ids):
            pooled = nn.Embed(100_000, 64)(ids).mean(1)
            h = nn.relu(nn.Dense(128, dtype=jnp.bfloat16)(pooled))
            return nn.Dense(1, dtype=jnp.bfloat16)(h)

    rng = np.random.default_rng(5)
    ids = rng.integers(-5, 100_005, (batch, 20)).astype(np.int32)
    params = Model().init(jax.random.PRNGKey(0), ids)
    m = from_jax(Model().apply, params, ids).module
    args = [np.asarray(x) for x in jax.tree.leaves(params)] + [ids]
    for excess in (True, False):
        r = rewrite_module(m, excess_precision=excess)
        opts = {"xla_allow_excess_precision": excess}
        want, got = run_module(m, args, opts)[0], run_module(r.module, args, opts)[0]
        assert want.tobytes() == got.tobytes()
        if excess:
            assert len(r.clusters) == rewritten, r.near_misses
            if not rewritten:
                assert any("is rounded by" in n["reason"] for n in r.near_misses)


# a bag's sum rounded to bf16 in its YNNPACK fusion and converted back (kept wide there), then
# concatenated with other features in a loop fusion that rounds the concatenation to bf16 for
# a bf16 dense layer (flax mixed precision: pooled embeddings beside dense features)
REROUNDED = """\
HloModule jit_f, is_scheduled=true
%region_0.1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.9 = f32[] add(%a, %b)
}
%fused_computation (param_0: f32[256,20,32]) -> f32[256,32] {
  %param_0 = f32[256,20,32]{2,1,0} parameter(0)
  %constant.4 = f32[] constant(0)
  %reduce.1 = f32[256,32]{1,0} reduce(%param_0, %constant.4), dimensions={1}, \
to_apply=%region_0.1, metadata={op_name="p_1"}
  %convert.1 = bf16[256,32]{1,0} convert(%reduce.1), metadata={op_name="p_2"}
  ROOT %convert.2 = f32[256,32]{1,0} convert(%convert.1)
}
%fused_computation.1 (param_0.1: f32[256,13], param_1.1: f32[256,32]) -> f32[256,45] {
  %param_0.1 = f32[256,13]{1,0} parameter(0)
  %param_1.1 = f32[256,32]{1,0} parameter(1)
  %concatenate.0 = f32[256,45]{1,0} concatenate(%param_0.1, %param_1.1), dimensions={1}
  %convert.3 = bf16[256,45]{1,0} convert(%concatenate.0)
  ROOT %convert.4 = f32[256,45]{1,0} convert(%convert.3)
}
ENTRY %main (rows: f32[256,20,32], d: f32[256,13]) -> f32[256,45] {
  %rows = f32[256,20,32]{2,1,0} parameter(0)
  %d = f32[256,13]{1,0} parameter(1)
  %ynn_fusion = f32[256,32]{1,0} fusion(%rows), kind=kCustom, calls=%fused_computation, \
backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
  ROOT %loop_fusion = f32[256,45]{1,0} fusion(%d, %ynn_fusion), kind=kLoop, \
calls=%fused_computation.1
}
"""


@pytest.mark.parametrize("between, status", [
    ("concatenate.0", "rounded"),  # only moved, then rounded again: the same value both ways
    ("add.5", "kept wide by YNNPACK"),  # arithmetic on the wide value first
    ("to_f16", "kept wide by YNNPACK"),  # rounded again, to another type (double rounding)
])
def test_a_wide_value_rounded_again_before_any_arithmetic_counts_as_rounded(between, status):
    """round(round(x)) = round(x): where every use of the value YNNPACK kept wide only moves it
    into a convert to the same type, the value read is the once-rounded one."""
    text = REROUNDED
    if between == "add.5":
        text = text.replace(
            "  %convert.3 = bf16[256,45]{1,0} convert(%concatenate.0)",
            "  %add.5 = f32[256,45]{1,0} add(%concatenate.0, %concatenate.0)\n"
            "  %convert.3 = bf16[256,45]{1,0} convert(%add.5)")
    elif between == "to_f16":
        text = text.replace("%convert.3 = bf16[256,45]", "%convert.3 = f16[256,45]")
    got = ynn_fusions.rounding_status(text, {"p_2": "after_bag"}, {"after_bag"})
    assert got == {"after_bag": {status}}


def test_flax_mixed_precision_pooled_embeddings_beside_dense_features():
    """flax ``nn.Embed(dtype=bfloat16)`` bags concatenated with dense features into bf16 dense
    layers (a recommender under flax's mixed precision): XLA:CPU's YNNPACK fusion keeps each
    bag's bf16 round trip wide, but the concatenation rounds it to bf16 again before the dense
    layer reads it, so the rewritten module (which rounds it once) computes the same bits.
    Both bags are rewritten, reading the f32 tables as bf16; bit-equal under both settings."""
    import flax.linen as nn

    from ember_xla.runtime.execute import run_module

    class Model(nn.Module):
        @nn.compact
        def __call__(self, dense, a, b):
            pa = nn.Embed(50_000, 32, dtype=jnp.bfloat16)(a).sum(1)
            pb = nn.Embed(20_000, 32, dtype=jnp.bfloat16)(b).mean(1)
            x = jnp.concatenate([dense.astype(jnp.bfloat16), pa, pb], -1)
            return nn.Dense(1, dtype=jnp.bfloat16)(nn.relu(nn.Dense(64,
                                                                    dtype=jnp.bfloat16)(x)))

    rng = np.random.default_rng(6)
    dense = rng.standard_normal((256, 13)).astype(np.float32)
    a = rng.integers(-3, 50_003, (256, 20)).astype(np.int32)
    b = rng.integers(0, 20_000, (256, 20)).astype(np.int32)
    params = Model().init(jax.random.PRNGKey(0), dense, a, b)
    m = from_jax(Model().apply, params, dense, a, b).module
    args = [np.asarray(x) for x in jax.tree.leaves(params)] + [dense, a, b]
    for excess in (True, False):
        r = rewrite_module(m, cost_model=False, excess_precision=excess)
        assert [c["attributes"]["row_type"] for c in r.clusters] == ["bf16", "bf16"], \
            r.near_misses
        opts = {"xla_allow_excess_precision": excess}
        assert run_module(m, args, opts)[0].tobytes() == run_module(r.module, args, opts)[
            0].tobytes()


def test_a_wide_value_read_by_arithmetic_inside_its_fusion_stays_wide():
    """The fusion's root is the dense layer reading the wide value, not the value itself."""
    text = REROUNDED.replace(
        "  ROOT %convert.2 = f32[256,32]{1,0} convert(%convert.1)",
        "  %convert.2 = f32[256,32]{1,0} convert(%convert.1)\n"
        "  ROOT %add.7 = f32[256,32]{1,0} add(%convert.2, %convert.2)")
    got = ynn_fusions.rounding_status(text, {"p_2": "after_bag"}, {"after_bag"})
    assert got == {"after_bag": {"kept wide by YNNPACK"}}
