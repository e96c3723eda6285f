"""A small DLRM-style model: several embedding tables of different sizes looked up with
multi-hot bags (jnp.take / tf.gather + segment sums), a bottom MLP on dense features, and a top
MLP on the concatenation, and one SGD training step of it (``jax.value_and_grad`` + a plain
update of every parameter). Written the way users write it — nothing ember-specific."""

from __future__ import annotations

from typing import Any

import numpy as np

ROWS = (50_000, 20_000, 5_000, 1_000, 200_000, 300)  # rows per table
POOLING = (20, 10, 4, 30, 40, 2)                      # mean lookups per sample per table
DIM = 32
BATCH = 2048
DENSE = 13


def make_params(seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "tables": [(rng.standard_normal((n, DIM)) * 0.1).astype(np.float32) for n in ROWS],
        "bot": (rng.standard_normal((DENSE, DIM)) * 0.2).astype(np.float32),
        "top": (rng.standard_normal((DIM * (len(ROWS) + 1), 1)) * 0.1).astype(np.float32),
    }


def make_batch(seed: int = 1, batch: int = BATCH) -> dict[str, np.ndarray]:
    """Dense features; per table flat ids and the sample (bag) each id belongs to."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {"dense": rng.standard_normal((batch, DENSE)).astype(np.float32)}
    for t, (n, p) in enumerate(zip(ROWS, POOLING, strict=True)):
        lengths = rng.integers(0, 2 * p + 1, size=batch)  # some bags are empty
        out[f"ids{t}"] = rng.integers(0, n, size=int(lengths.sum())).astype(np.int32)
        out[f"seg{t}"] = np.repeat(np.arange(batch), lengths).astype(np.int32)
    return out


def jax_model(params: dict[str, Any], batch: dict[str, np.ndarray]) -> Any:
    import jax
    import jax.numpy as jnp

    b = batch["dense"].shape[0]
    x = jax.nn.relu(batch["dense"] @ params["bot"])
    pooled = [x]
    for t, table in enumerate(params["tables"]):
        rows = jnp.take(table, batch[f"ids{t}"], axis=0)
        pooled.append(jax.ops.segment_sum(rows, batch[f"seg{t}"], num_segments=b))
    z = jnp.concatenate(pooled, axis=1)
    return jax.nn.sigmoid(z @ params["top"])


def tf_model(params: dict[str, Any], batch: dict[str, np.ndarray]) -> Any:
    import tensorflow as tf

    b = batch["dense"].shape[0]
    x = tf.nn.relu(tf.matmul(batch["dense"], params["bot"]))
    pooled = [x]
    for t, table in enumerate(params["tables"]):
        rows = tf.gather(table, batch[f"ids{t}"])
        pooled.append(tf.math.unsorted_segment_sum(rows, batch[f"seg{t}"], b))
    z = tf.concat(pooled, axis=1)
    return tf.sigmoid(tf.matmul(z, params["top"]))


def flat_args(params: dict[str, Any], batch: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Inputs in the order the exported module takes them (tables first, then the batch)."""
    out = list(params["tables"]) + [params["bot"], params["top"], batch["dense"]]
    for t in range(len(ROWS)):
        out += [batch[f"ids{t}"], batch[f"seg{t}"]]
    return out


def unflatten(args: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    k = len(ROWS)
    params = {"tables": list(args[:k]), "bot": args[k], "top": args[k + 1]}
    batch: dict[str, Any] = {"dense": args[k + 2]}
    for t in range(k):
        batch[f"ids{t}"] = args[k + 3 + 2 * t]
        batch[f"seg{t}"] = args[k + 4 + 2 * t]
    return params, batch


def jax_entry(*args: Any) -> Any:
    return jax_model(*unflatten(list(args)))


def tf_entry(*args: Any) -> Any:
    return tf_model(*unflatten(list(args)))


# -- a training step of the same model: jax.value_and_grad of a squared error + plain SGD ---
LR = 0.05


def make_labels(seed: int = 2, batch: int = BATCH) -> np.ndarray:
    return np.random.default_rng(seed).random((batch, 1)).astype(np.float32)


def train_args(params: dict[str, Any], batch: dict[str, np.ndarray],
               labels: np.ndarray) -> list[np.ndarray]:
    """Inputs of the exported training step: the model's (flat_args), then the labels."""
    return flat_args(params, batch) + [labels]


def jax_train_step(params: dict[str, Any], batch: dict[str, np.ndarray], labels: Any) -> Any:
    """One SGD step on every parameter, as a JAX user writes it: (loss, new parameters)."""
    import jax
    import jax.numpy as jnp

    def loss(p: dict[str, Any]) -> Any:
        return jnp.mean((jax_model(p, batch) - labels) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree.map(lambda p, g: p - LR * g, params, grads)


def jax_train_entry(*args: Any) -> Any:
    params, batch = unflatten(list(args[:-1]))
    return jax_train_step(params, batch, args[-1])
