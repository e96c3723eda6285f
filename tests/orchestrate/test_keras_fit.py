"""``ember_xla.compile_keras``: a Keras 3 model trained with ``model.fit`` (the JAX backend,
metrics, a validation split, out-of-range and negative ids), evaluated and predicted,
compiled through ember_xla.jit, ends with weights, history, metrics and predictions equal bit
for bit to the same model compiled by Keras with ``jax.jit``; its training step's lookup
gradient is fused with the optimizer's update. Models Keras does not jit are refused in one
line. Keras picks its backend once per process, so the models run in a child process with
``KERAS_BACKEND=jax``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys
import numpy as np, keras
import ember_xla
from ember_xla.native.rsqrt_probe import rsqrt_matches_xla

N, D, B, P = 500, 8, 32, 6
rng = np.random.default_rng(0)
X = [rng.integers(-3, N + 3, (B * 4, P)).astype(np.int32),
     rng.standard_normal((B * 4, 5)).astype(np.float32)]
y = rng.standard_normal((B * 4, 1)).astype(np.float32)


def make(optimizer, **compile_kw):
    keras.utils.set_random_seed(1)
    ids_in, dense_in = keras.Input((P,), dtype="int32"), keras.Input((5,))
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(N, D)(ids_in))
    x = keras.layers.Concatenate()([pooled, keras.layers.Dense(D, activation="relu")(dense_in)])
    m = keras.Model([ids_in, dense_in], keras.layers.Dense(1)(x))
    opt = {"sgd": keras.optimizers.SGD(0.1), "adagrad": keras.optimizers.Adagrad(0.1)}[optimizer]
    m.compile(optimizer=opt, loss="mse", metrics=["mae"], **compile_kw)
    return m


def run(m):
    h = m.fit(X, y, batch_size=B, epochs=2, validation_split=0.25, verbose=0)
    return ([np.asarray(w) for w in m.get_weights()] + [np.asarray(v) for v in h.history.values()]
            + [np.asarray(m.evaluate(X, y, batch_size=B, verbose=0)),
               m.predict(X, batch_size=B, verbose=0)])


optimizer = sys.argv[1]
theirs = run(make(optimizer))
m = make(optimizer)
handle = ember_xla.compile_keras(m)
ours = run(m)
equal = len(ours) == len(theirs) and all(
    a.dtype == b.dtype and a.tobytes() == b.tobytes() for a, b in zip(ours, theirs))
clusters = {k: [[c["pass"], c["kind"], c.get("optimizer")] for r in v.values()
                for c in r["clusters"]] for k, v in handle.reports.items()}
errors = []
for kw in ({"run_eagerly": True}, {"jit_compile": False}):
    try:
        ember_xla.compile_keras(make(optimizer, **kw))
    except ValueError as e:
        errors.append(str(e))
try:
    ember_xla.compile_keras(keras.Sequential([keras.layers.Dense(1)]))
except ValueError as e:
    errors.append(str(e))
print(json.dumps({"equal": equal, "clusters": clusters, "errors": errors,
                  "rsqrt_ok": rsqrt_matches_xla()}))
"""


@pytest.mark.parametrize("optimizer,fused", [("sgd", "sgd"), ("adagrad", "adagrad_keras")])
def test_keras_fit_evaluate_predict_through_ember(optimizer, fused):
    env = {**os.environ, "KERAS_BACKEND": "jax", "EMBER_XLA_COST_MODEL": "off"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, optimizer], capture_output=True,
                       text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["equal"], out
    c = out["clusters"]
    assert c["test (test_step)"] == [["forward", "padded_bag", None]], c
    assert c["predict (predict_step)"] == [["forward", "padded_bag", None]], c
    if fused == "adagrad_keras" and not out["rsqrt_ok"]:
        fused = None  # the kernel's rsqrt is not XLA:CPU's on this CPU: the update stays in XLA
    assert c["train (train_step)"] == [["forward", "padded_bag", None],
                                       ["backward", "scatter_grad", fused]], c
    assert len(out["errors"]) == 3, out
    assert "run_eagerly=True" in out["errors"][0] and "nothing to rewrite" in out["errors"][0]
    assert "jit_compile=False" in out["errors"][1]
    assert "call model.compile(...) first" in out["errors"][2]
    assert all("\n" not in e for e in out["errors"])
