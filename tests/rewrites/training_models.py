"""Corpus of training steps as real libraries write them: flax linen + optax (SGD, Adagrad,
Adam), flax nnx, haiku, equinox, jraph message passing, a token-embedding language model and
Keras 3 on TensorFlow (GradientTape + Keras SGD/Adagrad, ``jit_compile=True``). Each JAX step is
``jax.jit(train_step)`` of ``value_and_grad`` + the optimizer's update, exported with
``lower().compiler_ir("hlo")`` (with ``donate_argnums`` where the step says so); each TF step
goes through ember's TF import path (``from_tf_function``).

Every step records the clusters it must yield: ``forward`` (the cluster kinds of the lookups
followed by a reduction) and ``backward`` (one entry per table gradient: the optimizer whose
update consumes it, or None where the update touches rows without gradient and stays in XLA).
tests/rewrites/test_training_models.py checks the forward half and the equivalence of the
rewritten step; the backward record is what the backward matcher is held to.

``export(name)`` gives (ember Model, example entry inputs); ``inputs(name, case)`` gives entry
inputs for "random", "edge" (duplicate and negative ids, empty and zero-weight bags) or
"oob" (ids out of range as well). Exports are cached
per process. Importing this module imports no framework.
"""

from __future__ import annotations

import functools

import numpy as np
import training_flax  # noqa: F401  (each registers its steps)
import training_idioms  # noqa: F401
import training_jax  # noqa: F401
import training_keras  # noqa: F401
from training_corpus import STEPS, TrainStep  # noqa: F401

# ---------------------------------------------------------------------------------------
# export and inputs
# ---------------------------------------------------------------------------------------

def _flat(x) -> list[np.ndarray]:
    import jax

    return [np.asarray(a) for a in jax.tree_util.tree_leaves(x)]


@functools.cache
def _built(name: str):
    return STEPS[name].build()


@functools.cache
def export(name: str):
    """(ember Model, example entry inputs) of step ``name``, exported through its real path."""
    s = STEPS[name]
    fn, example = _built(name)
    if s.framework == "tf":
        from ember_xla.hlo_import.tf_source import from_tf_function

        model = from_tf_function(fn, *example, source=name)
        return model, [np.asarray(a) for a in example] + [
            np.asarray(model.bound[k]) for k in sorted(model.bound)]
    import jax

    from ember_xla.hlo_import.model import Model
    from ember_xla.hlo_import.proto import module_from_proto

    lowered = jax.jit(fn, donate_argnums=s.donate).lower(*example)
    proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    model = Model(module_from_proto(proto, f"jax:{name}"), f"jax:{name}")
    return model, [a for x in example for a in _flat(x)]


def inputs(name: str, case: str, seed: int = 0) -> list[np.ndarray]:
    """Entry inputs: the step's parameters and optimizer state (as exported) and fresh user
    inputs for ``case`` ("random", "edge" or "oob")."""
    s = STEPS[name]
    user = [np.asarray(u) for u in s.make_inputs(case, np.random.default_rng(seed))]
    model, example = export(name)
    if s.framework == "tf":
        return user + example[len(user):]
    return example[:len(example) - len(user)] + user
