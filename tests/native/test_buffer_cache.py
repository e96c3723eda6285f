"""The result-buffer cache: XLA:CPU's large results reuse freed blocks (no fresh pages), values
stay right, the limit and the off switch hold, and the C library still frees everything else."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ember_xla.native import buffer_cache
from ember_xla.runtime.xla_cpu import cache_result_buffers

N = 12 << 20  # 48 MiB of f32: above the cache's 8 MiB minimum and glibc's 32 MiB threshold


@pytest.fixture()
def cache():
    assert cache_result_buffers() > 0, "no call site of XLA:CPU's runtime redirected"
    old = buffer_cache.set_limit(1 << 30)
    assert buffer_cache.limit() == 1 << 30
    yield
    buffer_cache.set_limit(old)


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_results_reuse_freed_blocks_and_stay_right(cache):
    x = jnp.arange(N, dtype=jnp.int32)
    f = jax.jit(lambda a, k: a * k + 1)
    f(x, 2).block_until_ready()  # compiled; its result freed into the cache
    base = np.arange(N, dtype=np.int32)
    before = buffer_cache.stats()
    faults = 0
    for k in range(3, 8):
        f0 = _minor_faults()
        y = f(x, k).block_until_ready()
        faults += _minor_faults() - f0
        np.testing.assert_array_equal(np.asarray(y), base * k + 1)
        del y
    after = buffer_cache.stats()
    assert after.reused - before.reused >= 5
    assert after.mapped == before.mapped
    # 5 results of 48 MiB on fresh 4 KiB pages would be ~61,000 faults
    assert faults < 1000


def test_off_maps_anew_and_releases(cache):
    x = jnp.ones(N, jnp.float32)
    f = jax.jit(lambda a: a + 1)
    f(x).block_until_ready()
    buffer_cache.set_limit(0)
    assert buffer_cache.stats().idle == 0
    before = buffer_cache.stats()
    for _ in range(3):
        assert float(f(x)[N - 1]) == 2.0
    assert buffer_cache.stats().reused == before.reused


def test_limit_bounds_the_idle_bytes(cache):
    x = jnp.ones(N, jnp.float32)
    f = jax.jit(lambda a: (a + 1, a + 2, a + 3))
    buffer_cache.set_limit(64 << 20)  # room for one 48 MiB block
    outs = jax.block_until_ready(f(x))  # dispatch is asynchronous: no late allocations
    del outs
    s = buffer_cache.stats()
    assert s.idle_bytes <= 64 << 20 and s.idle <= 1


def test_small_and_foreign_allocations_untouched(cache):
    before = buffer_cache.stats()
    small = jax.jit(lambda a: a * 3)(jnp.ones((1000,), jnp.float32))
    assert float(small[0]) == 3.0
    arr = np.ones(N, np.float32) * 2  # numpy's allocation: the C library's, never the cache's
    del arr, small
    s = buffer_cache.stats()
    assert (s.reused, s.mapped) == (before.reused, before.mapped)


def test_environment_switch_turns_it_off():
    code = ("from ember_xla.runtime.xla_cpu import cache_result_buffers\n"
            "import jax\nprint(cache_result_buffers())")
    env = dict(os.environ, EMBER_XLA_BUFFER_CACHE_MIB="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "0"
