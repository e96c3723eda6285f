"""The MLPerf DLRM-DCNv2 (Criteo 1TB) embedding stage as a plain JAX function, and its data:
26 tables, the MLPerf rows per table (capped), the MLPerf multi-hot pooling factors; each
table's bags a ``jax.ops.segment_sum`` over its flat sample-major lookups, the 26 pooled
[B, D] results concatenated (or, ``padded_stage_fn``, padded [B, P] bags summed). Shared by
bench_embedding.py, sweep.py and bench_train.py."""

from __future__ import annotations

import gc

import numpy as np

MLPERF_ROWS = [
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209,
    11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36,
]  # fmt: skip
POOLING = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]


def make_data(args):
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(args.seed)
    rows = [min(r, args.max_rows) for r in MLPERF_ROWS]
    tables, idx, seg, offsets = [], [], [], []
    for n in rows:
        t = rng.standard_normal((n, args.dim), dtype=np.float32)
        tables.append(jax.device_put(t))  # one copy in XLA's memory; numpy's is dropped
        del t
    b = args.batch
    for n, p in zip(rows, POOLING, strict=True):
        idx.append(rng.integers(0, n, b * p, dtype=np.int32))
        seg.append(np.repeat(np.arange(b, dtype=np.int32), p))
        offsets.append(np.arange(b + 1, dtype=np.int32) * p)
    gc.collect()
    return rows, tables, [jnp.asarray(i) for i in idx], [jnp.asarray(s) for s in seg], offsets


def padded_stage_fn():
    """The same stage as a Keras / flax model writes it: each table's ids a padded [B, P]
    array (P its pooling factor), ``jnp.take(t, ids).sum(1)`` per table, concatenated. Its
    arguments: the 26 tables, then the 26 id arrays."""
    import jax.numpy as jnp

    def stage(*args):
        k = len(args) // 2
        tables, ids = args[:k], args[k:]
        return jnp.concatenate([jnp.take(t, i, axis=0).sum(1)
                                for t, i in zip(tables, ids, strict=True)], axis=1)

    return stage


def stage_fn(batch: int):
    import jax
    import jax.numpy as jnp

    def stage(*args):
        k = len(args) // 3
        tables, idx, seg = args[:k], args[k : 2 * k], args[2 * k :]
        pooled = [
            jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=batch)
            for t, i, s in zip(tables, idx, seg, strict=True)
        ]
        return jnp.concatenate(pooled, axis=1)

    return stage
