"""The f32 sum, max and min kernels' vector clones (AVX-512, AVX2, baseline SSE2; picked at
run time, capped by ``EMBER_XLA_ISA``) give XLA:CPU's bits for every row width they cover,
every index mode and s32 / s64 ids, folded (sorted segment ids) and unfolded plans; so do the
padded max / min bags' clones in both of XLA:CPU's orders. Each clone runs in its own process,
since the choice is made once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ember_xla.native")

_CHILD = r"""
import ctypes
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp, numpy as np
import ember_xla.native as native
from test_kernels import assert_same_bits, attrs, ember, make_table, reference
native.register_targets()
lib = native.load_library()
lib.EmberIsaLevel.restype = ctypes.c_int
print("level", lib.EmberIsaLevel())
rng = np.random.default_rng(7)
checked = 0
# D: AVX-512 widths (16k, one and several passes), AVX2-only widths (8 mod 16), odd widths
for d in (16, 128, 144, 256, 272, 520, 24, 40, 13):
    n = 300
    table = make_table(rng, n, d, jnp.float32)
    for itype in (jnp.int32, jnp.int64):
        for mode, wrap in (("clip", False), ("clip", True), ("fill", False), ("fill", True)):
            for sort, combiner in ((True, "sum"), (False, "sum"), (True, "max"),
                                   (False, "min")):
                length, num = 900, 64
                with jax.enable_x64(True):
                    idx = jnp.asarray(rng.integers(-n - 5, n + 5, length), itype)
                    seg = rng.integers(0, num, length)
                    seg = jnp.asarray(np.sort(seg) if sort else seg, itype)
                got = ember("segment_reduce", num, table, idx, seg,
                            **attrs(combiner, mode, wrap, False))
                want = reference(table, idx, seg, num, None, combiner, mode, wrap)
                assert_same_bits(got, want)
                checked += 1
# padded max / min bags in both of XLA:CPU's orders (native/padded_minmax.cc)
from test_padded_minmax import _call, _table
for d in (13, 24, 128, 296, 1000):
    table = _table(200, d, rng)
    for order, b, p in (("reduce_loop", 1, 3), ("ynn_groups4", 16, 20)):
        ids = rng.integers(0, 200, (b, p)).astype(np.int32)
        assert (b * p * d >= 4096) == (order == "ynn_groups4")
        for combiner in ("max", "min"):
            want = jax.jit(lambda r: r.max(1) if combiner == "max" else r.min(1))(table[ids])
            got = _call(table, ids, combiner, order)
            assert got.tobytes() == np.asarray(want).tobytes(), (d, order, combiner)
            checked += 1
print("checked", checked)
"""


@pytest.mark.parametrize("isa", ["default", "avx2", "baseline"])
def test_clones_give_xla_bits(isa):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_XLA_")}
    if isa != "default":
        env["EMBER_XLA_ISA"] = isa
    here = str(Path(__file__).resolve().parent)
    r = subprocess.run([sys.executable, "-c", _CHILD, here], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "checked 308" in r.stdout, r.stdout
    level = int(r.stdout.split("level ")[1].split()[0])
    assert level <= {"default": 2, "avx2": 1, "baseline": 0}[isa]  # the cap is in force
