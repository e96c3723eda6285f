"""Huge pages for large tables (ember_xla/native/table_pages.cc): a table of >= 64 MiB that a
second call reads at the same address is collapsed in place onto 2 MiB pages. Contents never
change (same bits as XLA in every mode), and the pages really become huge pages: checked in
/proc/self/smaps of a fresh process, so no earlier test's table shares the address."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_kernels import assert_same_bits, attrs, ember, reference  # noqa: E402

native = pytest.importorskip("ember_xla.native")
from ember_xla.native import table_pages  # noqa: E402

ROWS, D = 140_000, 128  # 71.7 MB of f32: above the 64 MiB threshold


def test_same_bits_in_every_mode():
    """Off, background and on-the-calling-thread: two calls each on a fresh copy of the table
    (the second call collapses it; the copies stay alive, so each mode gets its own range),
    results equal XLA's bit for bit, edge ids included (negative, out of range, duplicates)."""
    rng = np.random.default_rng(3)
    table = jnp.asarray(rng.standard_normal((ROWS, D), dtype=np.float32))
    raw = rng.integers(-ROWS - 5, ROWS + 5, 30_000)
    raw[:10] = [0, 0, -1, ROWS - 1, ROWS, -ROWS, -ROWS - 1, 7, 7, 7]
    idx = jnp.asarray(raw, jnp.int32)
    seg = jnp.asarray(np.sort(rng.integers(0, 1000, raw.size)).astype(np.int32))
    a = attrs("sum", "fill", True, False)
    want = jax.jit(lambda t, i, s: reference(t, i, s, 1000, None, "sum", "fill", True))(
        table, idx, seg)
    previous = table_pages.set_mode(1)
    try:
        copies, before = [], table_pages.stats().tables
        for mode in (0, 1, 2):
            table_pages.set_mode(mode)
            assert table_pages.describe_mode().startswith(table_pages.MODES[mode])
            copies.append(jnp.array(table, copy=True))  # a new buffer, same bits
            for _ in range(2):
                got = jax.jit(lambda t, i, s: ember("segment_reduce", 1000, t, i, s, **a))(
                    copies[-1], idx, seg)
                assert_same_bits(got, want)
            assert table_pages.wait(120)
            got = jax.jit(lambda t, i, s: ember("segment_reduce", 1000, t, i, s, **a))(
                copies[-1], idx, seg)
            assert_same_bits(got, want)
        if sys.platform.startswith("linux"):  # modes 1 and 2 each took their copy; 0 did not
            assert table_pages.stats().tables - before == 2
    finally:
        table_pages.set_mode(previous)


def test_set_mode_rejects_unknown_modes():
    with pytest.raises(ValueError, match="one of"):
        table_pages.set_mode(3)


PROBE = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
from ember_xla.native import register_targets, table_pages
register_targets()
rows, d, calls = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
table = jax.device_put(np.ones((rows, d), np.float32))
ptr = table.unsafe_buffer_pointer()
idx = jnp.arange(1000, dtype=jnp.int32)
seg = jnp.arange(1000, dtype=jnp.int32) // 10
call = jax.jit(lambda t, i, s: jax.ffi.ffi_call(
    "ember.segment_reduce", jax.ShapeDtypeStruct((100, d), jnp.float32))(
    t, i, s, combiner="sum", index_mode="clip", wrap_negative=False, weighted=False, init=0.0,
    index_bits=np.int64(64)))
for _ in range(calls):
    out = call(table, idx, seg).block_until_ready()
idle = table_pages.wait(300)
huge = 0
inside = False
lo, hi = ptr, ptr + rows * d * 4
for line in open("/proc/self/smaps"):
    head = line.split()[0]
    if "-" in head and ":" not in head:
        a, b = (int(x, 16) for x in head.split("-"))
        inside = a < hi and lo < b
    elif inside and head == "AnonHugePages:":
        huge += int(line.split()[1]) * 1024
s = table_pages.stats()
print(json.dumps({"idle": idle, "huge": huge, "bytes": rows * d * 4, "tables": s.tables,
                  "collapsed": s.bytes_collapsed, "failed": s.chunks_failed,
                  "errno": s.last_errno, "sum": float(out.sum())}))
"""


def probe(mode: str | None, calls: int, rows: int = ROWS) -> dict:
    env = dict(os.environ)
    env.pop("EMBER_XLA_TABLE_PAGES", None)
    if mode is not None:
        env["EMBER_XLA_TABLE_PAGES"] = mode
    out = subprocess.run([sys.executable, "-c", PROBE, str(rows), str(D), str(calls)],
                         capture_output=True, text=True, env=env, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def thp_mode() -> str:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "absent"
    return text[text.index("[") + 1 : text.index("]")]


needs_thp = pytest.mark.skipif(
    not sys.platform.startswith("linux") or thp_mode() in ("never", "absent"),
    reason="transparent huge pages are unavailable on this machine (not Linux, or THP 'never')")


@needs_thp
@pytest.mark.parametrize("mode", [None, "2"], ids=["default-background", "calling-thread"])
def test_second_call_puts_the_table_on_huge_pages(mode):
    r = probe(mode, calls=2)
    if r["failed"] and r["errno"] == 22 and r["collapsed"] == 0:
        pytest.skip("this kernel refuses MADV_COLLAPSE (EINVAL: Linux < 6.1)")
    assert r["idle"] and r["sum"] == 100 * D * 10.0
    assert r["tables"] == 1 and r["failed"] == 0
    aligned_interior = r["bytes"] - 2 * (2 << 20)  # at most one partial 2 MiB page each end
    assert r["collapsed"] >= aligned_interior
    assert r["huge"] >= aligned_interior, r  # smaps: the range really is on huge pages


@needs_thp
def test_one_call_small_tables_and_mode_off_leave_pages_alone():
    for mode, calls, rows in (("0", 3, ROWS), (None, 1, ROWS), (None, 3, 20_000)):
        r = probe(mode, calls=calls, rows=rows)
        assert r["tables"] == 0 and r["collapsed"] == 0, (mode, calls, rows, r)
        if thp_mode() == "madvise":  # in 'always' mode the allocator's pages may be huge anyway
            assert r["huge"] == 0, (mode, calls, rows, r)


FORGET = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
from ember_xla.native import register_targets, table_pages
register_targets()
rows, d = int(sys.argv[1]), int(sys.argv[2])
table = jax.device_put(np.ones((rows, d), np.float32))
idx = jnp.arange(10, dtype=jnp.int32)
call = jax.jit(lambda t, i: jax.ffi.ffi_call(
    "ember.segment_reduce", jax.ShapeDtypeStruct((10, d), jnp.float32))(
    t, i, i, combiner="sum", index_mode="clip", wrap_negative=False, weighted=False, init=0.0,
    index_bits=np.int64(64)))
counts = []
for _ in range(2):
    for _ in range(3):
        call(table, idx).block_until_ready()
    table_pages.wait(300)
    counts.append(table_pages.stats().tables)
    table_pages.forget()
print(json.dumps(counts))
"""


def test_forget_counts_a_table_at_a_seen_address_from_its_first_call_again():
    """After forget(), the same address is a new table: its second call queues it again (the
    collapse keys tables by address, and a freed table's address may be reused)."""
    env = dict(os.environ)
    env.pop("EMBER_XLA_TABLE_PAGES", None)
    out = subprocess.run([sys.executable, "-c", FORGET, str(ROWS), str(D)], capture_output=True,
                         text=True, env=env, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [1, 2]
