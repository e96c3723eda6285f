"""``ember-xla example``: export the built-in DLRM-style model from JAX (and TF) and one SGD
training step of it from JAX, rewrite each, verify the rewrite on XLA:CPU and print what was
found and the speed-up."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from ember_xla.examples import dlrm
from ember_xla.hlo.verifier import verify_module
from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.hlo_import.model import Model
from ember_xla.orchestrate.rewrite_model import rewrite_one


def _run(model: Model, out_dir: str, repeats: int, say: Any) -> None:
    from ember_xla.hlo_import.load import load_model
    from ember_xla.runtime.compare import time_modules
    from ember_xla.runtime.inputs import random_inputs

    report, _ = rewrite_one(model, out_dir, verify=True, seed=0, say=say)
    rewritten = load_model(os.path.join(out_dir, "rewritten.pb")).module
    verify_module(rewritten)
    inputs = random_inputs(model.module, 0, model.bound)
    t = time_modules({"xla": model.module, "ember": rewritten}, inputs, repeats)
    say(f"  time per batch: XLA:CPU {1e3 * t['xla']:.2f} ms, rewritten {1e3 * t['ember']:.2f} "
        f"ms -> speed-up {t['xla'] / t['ember']:.2f}x (median of {repeats}, same process)")
    if not report["verify"]["bitwise_equal"]:
        say(f"  note: outputs differ by at most {report['verify']['max_abs_diff']:.3g}")


def run_example(out_dir: str | None, with_tf: bool, repeats: int, say: Any = print) -> int:
    out_dir = out_dir or tempfile.mkdtemp(prefix="ember_example_")
    params, batch = dlrm.make_params(), dlrm.make_batch()
    args = dlrm.flat_args(params, batch)
    say(f"== built-in example: DLRM-style model, {len(dlrm.ROWS)} tables, batch "
        f"{batch['dense'].shape[0]} (JAX)")
    _run(from_jax(dlrm.jax_entry, *args), os.path.join(out_dir, "jax"), repeats, say)
    say(f"== built-in training example: one SGD step of the same model (jax.value_and_grad, "
        f"lr {dlrm.LR}; forward, backward and update rewritten)")
    train = dlrm.train_args(params, batch, dlrm.make_labels())
    _run(from_jax(dlrm.jax_train_entry, *train), os.path.join(out_dir, "jax_train"), repeats,
         say)
    if with_tf:
        from ember_xla.hlo_import.tf_source import from_tf_function

        say("== the same model in TensorFlow (tf.function, jit_compile)")
        _run(from_tf_function(dlrm.tf_entry, *args), os.path.join(out_dir, "tf"), repeats, say)
    say(f"outputs (rewritten modules and report.json) are in {out_dir}")
    return 0
