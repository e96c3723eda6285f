"""The workloads of ``bench_ladder.py``, as JAX functions whose HLO the rewrite turns into
ember clusters, with seeded inputs:

- ``dlrm``: MLPerf DLRM-DCNv2 embedding bags (sum, CSR offsets, D=128): a sample of its tables
  with their multi-hot pooling factors (placement-and-anchors.md), rows capped; every bag has
  exactly the table's pooling factor (as in the MLPerf multi-hot data);
- ``gnn``: GNN aggregation (segment sum of source-node features by destination node) on a
  synthetic power-law graph (in-degrees ~ Zipf), edges sorted by destination;
- ``attention``: a sparse-attention-like gather: each block pools 1-8 rows (uniform);
- ``dlrm_train``: an SGD training step of the ``dlrm`` bags (``jax.value_and_grad`` of a
  squared read-out of segment-sum bags, ``table - lr * grad``): forward segment reductions
  and, per table, the backward fused into ``ember.sparse_sgd`` (updated in place); rows
  capped at ``TRAIN_ROW_CAP`` (the Python reference emulator holds whole tables);
- ``adagrad_train``, ``rowwise_train``: the same step with optax's Adagrad (fused into
  ``ember.sparse_adagrad``) and with rowwise Adagrad written by hand (FBGEMM's
  EXACT_ROWWISE_ADAGRAD, accumulators 0.1: ``ember.sparse_rowwise_adagrad``);
- ``gnn_train``: the gradient of the ``gnn`` aggregation with respect to the node features
  (``ember.scatter_grad`` of the pooled gradient gathered by destination node)."""

from __future__ import annotations

import numpy as np

# (rows, pooling factor) of MLPerf DLRM-DCNv2 tables: the largest pooling (100, 27, 12), a
# mid one (8) and the single-hot majority (1); rows capped at 100k (the caches see misses
# anyway: 100k x 512 B = 51 MB > the 32 MB LLC of tmu.toml).
DLRM_TABLES = ((40_000_000, 100), (40_000_000, 27), (40_000_000, 12), (405_282, 8),
               (3_067_956, 3), (39_060, 1))
ROW_CAP = 100_000


def dlrm(batch: int, dim: int = 128, seed: int = 0):
    import ember_xla

    rng = np.random.default_rng(seed)
    args = []
    for rows, pooling in DLRM_TABLES:
        n = min(rows, ROW_CAP)
        args += [rng.standard_normal((n, dim)).astype(np.float32),
                 rng.integers(0, n, batch * pooling).astype(np.int32),
                 np.arange(0, batch * pooling + 1, pooling).astype(np.int32)]

    def fn(*a):
        return tuple(ember_xla.embedding_bag(a[i], a[i + 1], a[i + 2])
                     for i in range(0, len(a), 3))

    return fn, args


def gnn(nodes: int, avg_degree: int = 8, dim: int = 64, seed: int = 1):
    import jax

    rng = np.random.default_rng(seed)
    deg = np.minimum(rng.zipf(2.0, nodes), nodes)            # power-law in-degrees
    deg = np.maximum(1, (deg * (avg_degree * nodes / deg.sum())).astype(np.int64))
    dst = np.repeat(np.arange(nodes), deg).astype(np.int32)
    src = rng.integers(0, nodes, dst.size).astype(np.int32)
    feat = rng.standard_normal((nodes, dim)).astype(np.float32)

    def fn(x, s, d):
        return jax.ops.segment_sum(x[s], d, num_segments=nodes, indices_are_sorted=True)

    return fn, [feat, src, dst]


def attention(blocks: int, rows: int = 4096, dim: int = 64, seed: int = 2):
    import jax

    rng = np.random.default_rng(seed)
    per = rng.integers(1, 9, blocks)                           # 1-8 rows per block
    seg = np.repeat(np.arange(blocks), per).astype(np.int32)
    ids = rng.integers(0, rows, seg.size).astype(np.int32)
    keys = rng.standard_normal((rows, dim)).astype(np.float32)

    def fn(k, i, s):
        return jax.ops.segment_sum(k[i], s, num_segments=blocks, indices_are_sorted=True)

    return fn, [keys, ids, seg]


TRAIN_ROW_CAP = 2_000


def dlrm_train(batch: int, dim: int = 128, seed: int = 0, lr: float = 0.01,
               optimizer: str = "sgd", row_cap: int = TRAIN_ROW_CAP):
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    tables, ids = [], []
    for rows, pooling in DLRM_TABLES:
        n = min(rows, row_cap)
        tables.append(rng.standard_normal((n, dim)).astype(np.float32))
        ids.append(rng.integers(0, n, (batch, pooling)).astype(np.int32))
    head = rng.standard_normal((dim, 1)).astype(np.float32)

    def bag(t, i):  # a segment sum: XLA adds each bag's rows in order (no blocked reduce)
        seg = jnp.repeat(jnp.arange(batch), i.shape[1])
        return jax.ops.segment_sum(jnp.take(t, i.ravel(), axis=0), seg, num_segments=batch,
                                   indices_are_sorted=True)

    def loss(ts, ids):
        pooled = sum(bag(t, i) for t, i in zip(ts, ids, strict=True))
        return jnp.mean((pooled @ head) ** 2)

    if optimizer == "adagrad":  # optax's Adagrad: ember.sparse_adagrad
        import optax

        opt = optax.adagrad(lr)

        def step(ts, state, ids):
            value, grads = jax.value_and_grad(loss)(ts, ids)
            updates, state = opt.update(grads, state)
            return value, optax.apply_updates(ts, updates), state

        return step, [tables, opt.init(tables), ids]
    if optimizer == "rowwise_adagrad":  # by hand (FBGEMM's): ember.sparse_rowwise_adagrad
        accums = [np.full(t.shape[0], 0.1, np.float32) for t in tables]

        def rowwise(ts, accs, ids):
            value, grads = jax.value_and_grad(loss)(ts, ids)
            accs = [a + jnp.mean(g * g, axis=1) for a, g in zip(accs, grads, strict=True)]
            return value, [t - lr * g / (jnp.sqrt(a)[:, None] + 1e-8)
                           for t, g, a in zip(ts, grads, accs, strict=True)], accs

        return rowwise, [tables, accums, ids]

    def fn(ts, ids):
        value, grads = jax.value_and_grad(loss)(ts, ids)
        return value, [t - lr * g for t, g in zip(ts, grads, strict=True)]

    return fn, [tables, ids]


def adagrad_train(batch: int, dim: int = 128, seed: int = 0):
    return dlrm_train(batch, dim, seed, optimizer="adagrad")


def rowwise_train(batch: int, dim: int = 128, seed: int = 0):
    return dlrm_train(batch, dim, seed, optimizer="rowwise_adagrad")


def gnn_train(nodes: int, avg_degree: int = 8, dim: int = 64, seed: int = 1):
    import jax
    import jax.numpy as jnp

    agg, (feat, src, dst) = gnn(nodes, avg_degree, dim, seed)
    return jax.grad(lambda x, s, d: jnp.sum(jnp.tanh(agg(x, s, d)))), [feat, src, dst]


WORKLOADS = {"dlrm": dlrm, "gnn": gnn, "attention": attention, "dlrm_train": dlrm_train,
             "gnn_train": gnn_train, "adagrad_train": adagrad_train,
             "rowwise_train": rowwise_train}
