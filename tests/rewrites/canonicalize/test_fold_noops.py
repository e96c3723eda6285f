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


#: keras-rs's ``EmbedReduce`` without weights, as TF exports it: the rows times ones [B,P]
ONES = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  t = f32[50,32]{1,0} parameter(0)
  i = s32[64,10]{1,0} parameter(1)
  r = s32[64,10,1]{2,1,0} reshape(i)
  g = f32[64,10,32]{2,1,0} gather(t, r), offset_dims={2}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=2, slice_sizes={1,32}
  one = f32[] constant(1)
  o1 = f32[64,10,1]{2,1,0} broadcast(one), dimensions={}
  o2 = f32[64,10]{1,0} reshape(o1)
  o3 = f32[64,10,32]{2,1,0} broadcast(o2), dimensions={0,1}
  m1 = f32[64,10,32]{2,1,0} multiply(g, o3)
  two = f32[] constant(2)
  b2 = f32[64,10,32]{2,1,0} broadcast(two), dimensions={}
  m2 = f32[64,10,32]{2,1,0} multiply(b2, g)
  z = f32[] constant(0)
  s1 = f32[64,32]{1,0} reduce(m1, z), dimensions={1}, to_apply=add
  s2 = f32[64,32]{1,0} reduce(m2, z), dimensions={1}, to_apply=add
  ROOT out = (f32[64,32]{1,0}, f32[64,32]{1,0}) tuple(s1, s2)
}
"""


def test_rows_times_ones_fold_and_other_scales_stay(canon):
    """``rows * 1`` is the rows: folded, as XLA's simplifier folds it (else the bag would be
    taken for a weighted one, added in another order); ``rows * 2`` stays."""
    import numpy as np

    ids = np.random.default_rng(1).integers(0, 50, (64, 10)).astype(np.int32)
    work, _ = canon(ONES, [canon.table(50, 32), ids], "fold-noops")
    assert canon.opcodes(work).count("multiply") == 1
