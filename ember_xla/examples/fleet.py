"""A fleet of small models to try ``ember-xla batch`` on (and to test and benchmark it with):
JAX functions exported as HloModuleProto (``.pb``) and HLO text (``.hlo``), TensorFlow
functions exported the same way (``.pb``, ``.txt``), and TF SavedModels with a table variable.
The embedding idioms vary (segment sums, padded bags with sum/mean/max, two tables, none at
all), and so do table sizes.

    python -m ember_xla.examples.fleet DIR [--jax_variants N] [--tf_variants N] [--savedmodels N]
"""

from __future__ import annotations

import argparse
import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ember_xla.util.atomic import write_atomic

SIZES = ((64, 8), (200, 16), (1000, 8), (300, 32), (50, 4))
BATCH, BAG = 16, 4


def _jax_fn(kind: str) -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp

    def seg_sum(t, ids, seg, w):
        return jnp.tanh(jax.ops.segment_sum(jnp.take(t, ids, axis=0), seg, BATCH) @ w)

    def bag(combiner):
        def f(t, ids, seg, w):
            rows = t[ids.reshape(BATCH, BAG)]
            pooled = {"sum": rows.sum(1), "mean": rows.mean(1), "max": rows.max(1)}[combiner]
            return jnp.tanh(pooled @ w)
        return f

    def two_tables(t, ids, seg, w):
        a = jax.ops.segment_sum(jnp.take(t, ids, axis=0), seg, BATCH)
        b = t[ids[::-1].reshape(BATCH, BAG)].sum(1)
        return jnp.tanh(a @ w + b @ w)  # (a + b) @ w: XLA folds b + a's scatter-add

    def mlp(t, ids, seg, w):  # no embedding lookup at all
        return jnp.tanh(t[:BATCH] @ w) + seg[:BATCH, None]

    return {"segsum": seg_sum, "bagsum": bag("sum"), "bagmean": bag("mean"),
            "bagmax": bag("max"), "two": two_tables, "mlp": mlp}[kind]


JAX_KINDS = ("segsum", "bagsum", "bagmean", "bagmax", "two", "mlp")


def _args(rows: int, dim: int) -> list[np.ndarray]:
    n = BATCH * BAG
    return [np.zeros((rows, dim), np.float32), np.zeros(n, np.int32),
            np.repeat(np.arange(BATCH, dtype=np.int32), BAG), np.zeros((dim, 4), np.float32)]


def jax_models(folder: str, n: int) -> list[str]:
    """``n`` JAX variants, each written as ``.pb`` and ``.hlo`` (2n files)."""
    import jax

    out = []
    combos = itertools.islice(itertools.cycle(itertools.product(SIZES, JAX_KINDS)), n)
    for i, ((rows, dim), kind) in enumerate(combos):
        lowered = jax.jit(_jax_fn(kind)).lower(*_args(rows, dim))
        base = os.path.join(folder, f"jax_{i:03d}_{kind}_{rows}x{dim}")
        write_atomic(base + ".pb", lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
        write_atomic(base + ".hlo", lowered.compiler_ir("hlo").as_hlo_text())
        out += [base + ".pb", base + ".hlo"]
    return out


def _tf_fn(kind: str) -> Callable[..., Any]:
    import tensorflow as tf

    def lookup_sum(t, ids, seg):
        return tf.math.unsorted_segment_sum(tf.nn.embedding_lookup(t, ids), seg, BATCH)

    def lookup_mean(t, ids, seg):
        return tf.math.unsorted_segment_mean(tf.gather(t, ids), seg, BATCH)

    def gather_bag(t, ids, seg):
        return tf.reduce_sum(tf.reshape(tf.gather(t, ids), [BATCH, BAG, -1]), axis=1)

    return {"lookupsum": lookup_sum, "lookupmean": lookup_mean, "gatherbag": gather_bag}[kind]


TF_KINDS = ("lookupsum", "lookupmean", "gatherbag")


def tf_models(folder: str, n: int) -> list[str]:
    """``n`` tf.function variants, each written as ``.pb`` and ``.txt`` (2n files)."""
    import tensorflow as tf

    out = []
    combos = itertools.islice(itertools.cycle(itertools.product(SIZES, TF_KINDS)), n)
    for i, ((rows, dim), kind) in enumerate(combos):
        fn = tf.function(_tf_fn(kind), jit_compile=True)
        args = [tf.constant(a) for a in _args(rows, dim)[:3]]
        base = os.path.join(folder, f"tf_{i:03d}_{kind}_{rows}x{dim}")
        ir = fn.experimental_get_compiler_ir(*args)
        write_atomic(base + ".pb", bytes(ir(stage="hlo_serialized")))
        write_atomic(base + ".txt", ir(stage="hlo"))
        out += [base + ".pb", base + ".txt"]
    return out


def savedmodel(path: str, rows: int, dim: int, seed: int = 0) -> str:
    """A SavedModel with a table variable and one serving signature."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)

    class Rec(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = tf.Variable(rng.standard_normal((rows, dim)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([BATCH * BAG], tf.int32),
                                      tf.TensorSpec([BATCH * BAG], tf.int32)])
        def serve(self, ids, bag):
            looked = tf.nn.embedding_lookup(self.table, ids)
            return {"pooled": tf.math.unsorted_segment_sum(looked, bag, BATCH)}

    m = Rec()
    tf.saved_model.save(m, path, signatures={"serving_default": m.serve})
    return path


def make_fleet(folder: str, jax_variants: int = 18, tf_variants: int = 6,
               savedmodels: int = 3) -> list[str]:
    """Write the fleet into ``folder``; returns the model paths (files and SavedModel dirs)."""
    os.makedirs(folder, exist_ok=True)
    paths = jax_models(folder, jax_variants)
    if tf_variants or savedmodels:
        paths += tf_models(folder, tf_variants)
        for i in range(savedmodels):
            rows, dim = SIZES[i % len(SIZES)]
            paths.append(savedmodel(os.path.join(folder, f"sm_{i:03d}_{rows}x{dim}"), rows,
                                    dim, seed=i))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--jax_variants", type=int, default=18)
    ap.add_argument("--tf_variants", type=int, default=6)
    ap.add_argument("--savedmodels", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    paths = make_fleet(a.folder, a.jax_variants, a.tf_variants, a.savedmodels)
    print(f"{len(paths)} models in {a.folder}")


if __name__ == "__main__":
    main()
