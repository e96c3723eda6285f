"""A TF/Keras training step's sparse apply (the optimizer's scatter into the variable,
patterns/sparse_apply.py) as ``ember.ordered_scatter`` vs left to XLA:CPU.

A benchmark, not a test. A Keras ``Sequential`` (Embedding V x D, GlobalAveragePooling1D, two
Dense layers) trained with Keras SGD in a ``tf.function`` exported with ``jit_compile``; three
modules timed interleaved in one process (``runtime.compare.time_modules``, donated variables
given fresh buffers per run): XLA:CPU's own, the rewrite with every cluster (the bag and the
ordered scatter: ``--rewrite_all``), and the same rewrite with the ordered scatter put back to
XLA (a ``call`` of its outlined computation). Medians of ``--reps`` runs per round, ratios.

    python benchmarks/bench_sparse_apply.py
    python benchmarks/bench_sparse_apply.py --sizes 20000,32,256,8 200000,64,2048,20
"""

from __future__ import annotations

import argparse

import numpy as np

SIZES = [(20_000, 32, 256, 8), (200_000, 64, 2048, 20)]


def build(v: int, d: int, b: int, p: int):
    import keras
    import tensorflow as tf

    from ember_xla.hlo_import.tf_source import from_tf_function

    model = keras.Sequential([keras.layers.Embedding(v, d), keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.build((None, p))
    opt = keras.optimizers.SGD(0.1)
    opt.build(model.trainable_variables)

    @tf.function(input_signature=[tf.TensorSpec([b, p], tf.int32),
                                  tf.TensorSpec([b, 1], tf.float32)], jit_compile=True)
    def step(ids, label):
        with tf.GradientTape() as tape:
            pred = model(ids, training=True)
            loss = tf.reduce_mean(keras.losses.binary_crossentropy(label, pred,
                                                                   from_logits=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    rng = np.random.default_rng(0)
    return from_tf_function(step, rng.integers(0, v, (b, p)).astype(np.int32),
                            (rng.random((b, 1)) > 0.5).astype(np.float32), source="keras_sgd")


def without(module, target: str):
    """``module`` with the calls of ``target`` replaced by calls of their outlined
    computations (XLA computes those clusters again)."""
    from ember_xla.ir.operation import Operation
    from ember_xla.ir.rewriter import PatternRewriter

    m = module.clone()
    rw = PatternRewriter()
    for op in list(m.entry.ops):
        if op.opcode == "custom-call" and op.attributes.get("custom_call_target") == target:
            new = rw.insert_before(op, Operation("call", list(op.operands), [op.result.type],
                                                 {}, [op.callees[0]], name=op.name + ".xla"))
            rw.replace_all_uses(op.result, new.result)
            rw.erase(op)
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="*", help="V,D,B,P")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    sizes = [tuple(int(x) for x in s.split(",")) for s in a.sizes] if a.sizes else SIZES

    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.compare import time_modules
    from ember_xla.runtime.inputs import random_inputs

    for v, d, b, p in sizes:
        model = build(v, d, b, p)
        r = rewrite_module(model.module, cost_model=False)
        kinds = sorted(c["kind"] for c in r.clusters)
        mods = {"xla": model.module, "all": r.module,
                "no_ordered": without(r.module, "ember.ordered_scatter")}
        inputs = random_inputs(model.module, 0, model.bound)
        print(f"V={v} D={d} B={b} P={p}: clusters {kinds}")
        for _ in range(a.rounds):
            t = time_modules(mods, inputs, a.reps)
            print(f"  xla {t['xla'] * 1e3:.3f} ms, all {t['all'] * 1e3:.3f} ms, without the "
                  f"ordered scatter {t['no_ordered'] * 1e3:.3f} ms: all {t['xla'] / t['all']:.2f}x"
                  f" XLA, without it {t['xla'] / t['no_ordered']:.2f}x, the ordered scatter's "
                  f"own {t['no_ordered'] / t['all']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
