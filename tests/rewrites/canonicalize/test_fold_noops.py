"""fold-noops: identity transposes and same-type converts between a lookup and its
reduction (as TF's einsum and reduce_sum emit them) disappear; real ones stay."""

HLO = """HloModule m, entry_computation_layout={(f32[3,4]{1,0})->f32[4]{0}}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  t = f32[3,4]{1,0} transpose(x), dimensions={0,1}
  c = f32[3,4]{1,0} convert(t)
  r = f32[4,3]{1,0} transpose(c), dimensions={1,0}
  z = f32[] constant(0)
  ROOT s = f32[4]{0} reduce(r, z), dimensions={1}, to_apply=add
}
"""


def test_identity_transpose_and_convert_fold(canon):
    import numpy as np

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    work, _ = canon(HLO, [x], "fold-noops")
    ops = canon.opcodes(work)
    assert ops.count("transpose") == 1 and "convert" not in ops
