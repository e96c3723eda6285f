"""Forms the lowering does not handle are refused with a reason (never lowered wrong)."""

import dataclasses

import pytest
import slc_specs

from ember_xla.call_specs import ArraySpec, LoweringRefused, cluster_spec
from ember_xla.dae_target.lower.to_slc import lower_to_slc
from ember_xla.hlo.parser import parse_module as parse_hlo_text

HLO = """\
HloModule m, entry_computation_layout={(f32[6,2]{1,0}, s32[4]{0}, s32[4]{0})->f32[3,2]{1,0}}

ENTRY %main (table: f32[6,2], idx: s32[4], seg: s32[4]) -> f32[3,2] {
  %table = f32[6,2]{1,0} parameter(0)
  %idx = s32[4]{0} parameter(1)
  %seg = s32[4]{0} parameter(2)
  ROOT %r = f32[3,2]{1,0} custom-call(%table, %idx, %seg), CALL
}
""".replace("CALL", 'custom_call_target="ember.segment_reduce", '
            "api_version=API_VERSION_TYPED_FFI, backend_config={CONFIG}")
GOOD = ('{combiner = "sum", index_bits = 64 : i64, index_mode = "clip", init = 0.0 : f64, '
        'weighted = false, wrap_negative = true}')


def _call(config: str = GOOD, hlo: str = HLO):
    m = parse_hlo_text(hlo.replace("{CONFIG}", config))
    return next(op for op in m.entry.ops if op.opcode == "custom-call")


def test_hand_written_call_is_accepted():
    spec = cluster_spec(_call())
    assert spec.kind == "segment_reduce" and spec.outlined is None


@pytest.mark.parametrize("change,reason", [
    (("sum", "prod"), "combiner"),
    (('"clip"', '"wrap"'), "index_mode"),
    (("64 : i64", "16 : i64"), "index_bits"),
    (("weighted = false", "weighted = true"), "operands, weighted=True"),
    ((", wrap_negative = true", ""), "attributes missing"),
])
def test_bad_attributes(change, reason):
    with pytest.raises(LoweringRefused, match=reason):
        cluster_spec(_call(GOOD.replace(*change)))


F64_TABLE = [("f32[6,2]", "f64[6,2]")]
F32_SEG = [("%seg = s32[4]{0}", "%seg = f32[4]{0}"), ("seg: s32[4]", "seg: f32[4]"),
           ("s32[4]{0}, s32[4]{0})", "s32[4]{0}, f32[4]{0})")]


@pytest.mark.parametrize("changes,reason", [(F64_TABLE, "table"), (F32_SEG, "s32/s64")])
def test_bad_operand_types(changes, reason):
    hlo = HLO
    for old, new in changes:
        assert old in hlo
        hlo = hlo.replace(old, new)
    with pytest.raises(LoweringRefused, match=reason):
        cluster_spec(_call(hlo=hlo))


def test_clip_on_a_table_without_rows():
    with pytest.raises(LoweringRefused, match="without rows"):
        lower_to_slc(slc_specs.offsets_bag(n=0, mode="clip"))


def test_weights_that_are_not_one_per_lookup():
    spec = slc_specs.offsets_bag(weighted=True)
    part = dataclasses.replace(spec.parts[0], weights=ArraySpec((3, 2), "f32"))
    with pytest.raises(LoweringRefused, match="cannot be read"):
        lower_to_slc(dataclasses.replace(spec, parts=(part,)))


def test_padded_bag_order_on_the_dae_machine():
    """A DAE rewrite gives padded bags the programs' own order (sequential), while the CPU
    rewrite gives a bag of >= 4096 elements XLA:CPU's blocked order, lowered in that order
    (tests/emulator/test_kinds_on_targets.py checks it bit for bit)."""
    import jax.numpy as jnp
    import numpy as np

    from ember_xla.call_specs import call_attributes, cluster_spec, ember_calls
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.orchestrate.rewrite_model import rewrite_for

    t, i = np.ones((100, 16), np.float32), np.zeros((64, 64), np.int32)
    m = from_jax(lambda t, i: jnp.take(t, i, axis=0).sum(1), t, i).module
    (dae,) = ember_calls(rewrite_for(m, "dae").module)
    assert call_attributes(dae)["sum_order"] == "sequential"
    (cpu,) = ember_calls(rewrite_for(m, "cpu", cost_model=False).module)
    assert call_attributes(cpu)["sum_order"] == "blocked"
    assert cluster_spec(cpu).sum_order == "blocked"
    lower_to_slc(cluster_spec(cpu))
    lower_to_slc(cluster_spec(dae))


@pytest.mark.parametrize("order", ["zigzag"])
def test_an_order_without_a_lowering_is_refused(order):
    spec = slc_specs.make_spec("padded_bag", [(10, 4, "f32", "f32")], 0, 3, "sum", "clip",
                               False, 32, "s32", bag_width=20)
    lower_to_slc(spec)
    spec = dataclasses.replace(spec, sum_order=order)
    with pytest.raises(LoweringRefused, match=f"sum_order={order}"):
        lower_to_slc(spec)


@pytest.mark.parametrize("order, combiner, weights", [
    ("blocked", "max", None), ("blocked", "sum", "bf16"), ("vector8", "sqrt_n", None),
    ("tree32", "sum", "f32"), ("vector8", "sum", "f16")])
def test_xla_orders_outside_the_kernels_forms(order, combiner, weights):
    spec = slc_specs.make_spec("padded_bag", [(10, 4, "f16" if weights == "f16" else "f32",
                                               "f32")], 0, 3, combiner, "clip", False, 32,
                               "s32", bag_width=28, weights=weights)
    with pytest.raises(LoweringRefused, match=f"{order}-order bag"):
        lower_to_slc(dataclasses.replace(spec, sum_order=order))


PADDED_HLO = """\
HloModule m, entry_computation_layout={(f32[6,2]{1,0}, s32[3,4]{1,0})->f32[3,2]{1,0}}

ENTRY %main (table: f32[6,2], ids: s32[3,4]) -> f32[3,2] {
  %table = f32[6,2]{1,0} parameter(0)
  %ids = s32[3,4]{1,0} parameter(1)
  ROOT %r = f32[3,2]{1,0} custom-call(%table, %ids), custom_call_target="ember.padded_bag", \
api_version=API_VERSION_TYPED_FFI, backend_config={CONFIG}
}
"""
PADDED = ('{combiner = "sum", index_bits = 64 : i64, index_mode = "clip", init = 0.0 : f64, '
          'row_type = "ROW", sum_order = "sequential", weighted = false, wrap_negative = true}')


def test_rows_read_as_bf16_are_refused_and_rows_as_stored_lowered():
    assert cluster_spec(_call(PADDED.replace("ROW", ""), PADDED_HLO)).kind == "padded_bag"
    with pytest.raises(LoweringRefused, match="row_type=bf16"):
        cluster_spec(_call(PADDED.replace("ROW", "bf16"), PADDED_HLO))
