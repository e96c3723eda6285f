"""The torch side of benchmarks/bench_train.py: FBGEMM's table-batched embedding (TBE) with its
fused backward + optimizer, torch.nn.EmbeddingBag(sparse=True) with a torch optimizer, and the
check of a torch variant's tables after one step against XLA's."""

from __future__ import annotations

import numpy as np

#: the learning rate and Adagrad epsilon of every variant
LR, EPS = 0.01, 1e-8


def tbe_variant(args, data, optimizer: str):
    import torch
    from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        ComputeDevice,
        EmbeddingLocation,
        PoolingMode,
    )
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        SplitTableBatchedEmbeddingBagsCodegen,
    )

    rows, tables, ids, seg, readout, labels = data
    opt = {"sgd": EmbOptimType.EXACT_SGD, "rowwise_adagrad": EmbOptimType.EXACT_ROWWISE_ADAGRAD}
    tbe = SplitTableBatchedEmbeddingBagsCodegen(
        [(n, args.dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for n in rows],
        optimizer=opt[optimizer], learning_rate=LR, eps=EPS, weights_precision=SparseType.FP32,
        pooling_mode=PoolingMode.SUM, device="cpu")
    with torch.no_grad():
        for i, t in enumerate(tables):
            tbe.split_embedding_weights()[i].copy_(torch.from_numpy(t))
    indices = torch.from_numpy(np.concatenate(ids).astype(np.int64))
    lengths = np.concatenate([np.bincount(s, minlength=args.batch) for s in seg])
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    head = torch.from_numpy(readout.copy()).requires_grad_()
    y = torch.from_numpy(labels)

    def run():
        loss = ((tbe(indices, offsets) @ head - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            head.sub_(LR * head.grad)
            head.grad = None
        return loss
    run.tables = lambda: [w.detach().numpy().copy() for w in tbe.split_embedding_weights()]
    return run, f"FBGEMM TBE {opt[optimizer].name} (fused backward + update, in place)"


def torch_variant(args, data, optimizer: str):
    import torch

    rows, tables, ids, seg, readout, labels = data
    bags = [torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(t.copy()), freeze=False,
                                                  mode="sum", sparse=True) for t in tables]
    params = [b.weight for b in bags]
    sparse = (torch.optim.SGD(params, lr=LR) if optimizer == "sgd"
              else torch.optim.Adagrad(params, lr=LR, eps=EPS))
    head = torch.from_numpy(readout.copy()).requires_grad_()
    tids = [torch.from_numpy(i.astype(np.int64)) for i in ids]
    toffs = [torch.from_numpy(np.concatenate([[0], np.cumsum(np.bincount(
        s, minlength=args.batch))[:-1]]).astype(np.int64)) for s in seg]
    y = torch.from_numpy(labels)

    def run():
        pooled = torch.cat([b(i, o) for b, i, o in zip(bags, tids, toffs, strict=True)], 1)
        loss = ((pooled @ head - y) ** 2).mean()
        sparse.zero_grad()
        head.grad = None
        loss.backward()
        sparse.step()
        with torch.no_grad():
            head.sub_(LR * head.grad)
        return loss
    run.tables = lambda: [p.detach().numpy().copy() for p in params]
    kind = "SGD" if optimizer == "sgd" else "Adagrad (element-wise, sparse grads)"
    return run, f"torch EmbeddingBag(sparse=True) + optim.{kind}"


def check_torch(name: str, run, xla_tables: list[np.ndarray], same_algorithm: bool) -> str:
    """One step of a torch variant from the shared start against XLA's updated tables. The
    rowwise-Adagrad step normalises each row's gradient: float reorderings of a tiny gradient
    move its update by a larger relative amount, hence atol LR * 1e-3."""
    run()
    got = run.tables()
    diff = max(float(np.abs(a - b).max()) for a, b in zip(got, xla_tables, strict=True))
    close = all(np.allclose(a, b, rtol=1e-4, atol=LR * 1e-3)
                for a, b in zip(got, xla_tables, strict=True))
    what = "allclose to" if same_algorithm else "(another algorithm) vs"
    return f"check: {name} tables after one step {what} XLA: {close} (max |diff| {diff:.2e})"
