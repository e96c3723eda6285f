"""Training steps written with Keras 3 on TensorFlow (GradientTape + Keras SGD / Adagrad
under ``tf.function(jit_compile=True)``), registered into the corpus
(training_corpus.STEPS)."""

from __future__ import annotations

import numpy as np
from training_corpus import (
    LR,
    D,
    N,
    P,
    TrainStep,
    _ids,
    _labels,
    reg,
)

# ---------------------------------------------------------------------------------------
# Keras 3 on TensorFlow: Embedding + GlobalAveragePooling1D + Dense, GradientTape, Keras
# SGD / Adagrad applying the IndexedSlices gradient as a scatter into the variable
# ---------------------------------------------------------------------------------------

def _keras_build(opt):
    """``opt``: "sgd" | "adagrad", or a function making the Keras optimizer."""
    def build():
        import keras
        import tensorflow as tf

        inp = keras.Input((P,), dtype="int32")
        x = keras.layers.Embedding(N, D, embeddings_initializer=keras.initializers.RandomNormal(
            seed=1))(inp)
        out = keras.layers.Dense(1, kernel_initializer=keras.initializers.RandomNormal(seed=2))(
            keras.layers.GlobalAveragePooling1D()(x))
        model = keras.Model(inp, out)
        optimizer = (opt() if callable(opt) else
                     {"sgd": keras.optimizers.SGD, "adagrad": keras.optimizers.Adagrad}[opt](LR))
        optimizer.build(model.trainable_variables)

        @tf.function(jit_compile=True)
        def train_step(ids, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(ids) - y) ** 2)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        ids, y = _keras_inputs("random", np.random.default_rng(0))
        return train_step, [ids, y]
    return build


def _keras_inputs(case, rng):
    ids = np.clip(_ids(rng, case), 0, N - 1)          # tf.gather on CPU rejects OOB ids
    return [ids.astype(np.int32), _labels(rng, case)]


# Keras SGD subtracts a duplicate id's updates one at a time, ``(t - lr*g1) - lr*g2``, as one
# XLA scatter into the variable: rewritten as ember.ordered_scatter (the same order, in place)
# and reported as the fused "sgd". Keras Adagrad's accumulator scatter-add is rewritten the
# same way (no optimizer fused: it is half of the update), while its table update -- the
# IndexedSlices divided by the dense sqrt(accumulator + eps) through a conditional of dynamic
# shape -- stays in XLA: two backward entries, neither fused.
_KERAS_BACKWARD = {"sgd": ("sgd",), "adagrad": (None, None)}

for _opt in ("sgd", "adagrad"):
    reg(TrainStep(f"keras_embedding_average_{_opt}", "keras", _opt, "tf", ("padded_bag",),
                  _KERAS_BACKWARD[_opt], _keras_build(_opt), _keras_inputs,
                  refusal="Keras Adagrad",
                  notes="tf.gather's gradient is IndexedSlices; the Keras optimizer applies it "
                        "as an XLA scatter straight into the variable (no zero buffer): "
                        "rewritten as ember.ordered_scatter, in place"))
