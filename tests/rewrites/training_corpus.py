"""The shared core of the training-step corpus (training_models.py): the step record
(``TrainStep``: the clusters a step must yield, per table gradient the optimizer its update
fuses into or None where it must stay in XLA), the registry ``STEPS`` the per-library modules
(training_flax.py, training_jax.py, training_keras.py) fill, and the input generators and
optax helpers they share. Importing it imports no framework."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

B, P, N, D = 4, 6, 20, 8      # bags, bag length, table rows, row width
T, V_LM = 5, 24               # sequence length and vocabulary of the language-model step
V, E = 7, 16                  # graph nodes, edges
LR = 0.1

# A weighted bag's step: XLA:CPU fuses the weight multiply into its bag reduce (fused
# multiply-adds), which the kernel's sequential_fma order reproduces: bit for bit.
TOL_WEIGHTED_BAG = 0.0
# The pooled [B, 2D] rows of the two-table step are bit-identical, but XLA:CPU computes the
# read-out dot [B, 2D] x [2D, 1] with another order of additions when its operand is the
# concatenate of the custom calls than when it is XLA's own scatters (measured: the
# prediction differs by 1.2e-7, the loss happens to agree); the gradients then differ by
# rounding.
TOL_READOUT_DOT = 1e-5


@dataclass(frozen=True)
class TrainStep:
    name: str
    library: str
    optimizer: str                    # sgd | adagrad | rowwise_adagrad | adam | adamw
    framework: str                    # jax | tf
    forward: tuple[str, ...]          # expected forward cluster kinds
    backward: tuple[str | None, ...]  # per table gradient: fusable optimizer, or None
    build: Callable                   # () -> (step fn, example args)
    make_inputs: Callable             # (case, rng) -> user (non-parameter) inputs
    donate: tuple[int, ...] = ()      # donate_argnums of the JAX step
    tolerance: float = 0.0            # 0: outputs bit-identical to XLA:CPU
    refusal: str = ""                 # what each refused (None) backward entry's reason says
    notes: str = ""


STEPS: dict[str, TrainStep] = {}


def reg(s: TrainStep) -> None:
    assert s.name not in STEPS
    STEPS[s.name] = s


def _ids(rng, case, shape=(B, P), n=N):
    """"edge": duplicates (within and across bags) and negative ids that wrap into range;
    "oob": also ids past either end (jnp.take fills NaN rows, XLA's gather clamps)."""
    ids = rng.integers(0, n, size=shape)
    if case in ("edge", "oob"):
        flat = ids.reshape(-1)
        flat[:7] = [-1, n - 1, -n, 0, 0, n - 1, -1]
        if case == "oob":
            flat[7:10] = [n, n + 3, -n - 1]
        ids = flat.reshape(shape)
        if len(shape) == 2:
            ids[1, :] = ids[1, 0]                         # one row repeated in a bag
    return ids.astype(np.int32)


def _labels(rng, case):
    return rng.standard_normal((B, 1)).astype(np.float32)


def _bag_inputs(case, rng):
    return [_ids(rng, case), _labels(rng, case)]


def _optax(kind: str):
    import optax

    return {"sgd": lambda: optax.sgd(LR), "adagrad": lambda: optax.adagrad(LR),
            "adam": lambda: optax.adam(LR),
            "adamw": lambda: optax.adamw(LR, weight_decay=1e-2)}[kind]()


def _jax_step(loss_fn, tx):
    """``value_and_grad`` of ``loss_fn(params, *batch)`` + the optax update."""
    import jax
    import optax

    def train_step(params, opt_state, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step


def _squared_error_step(apply, params, tx, *batch):
    """``_jax_step`` of the mean squared error of ``apply(params, *inputs)`` against the
    batch's last array, and its example arguments: params, ``tx``'s state, the batch."""
    def loss(p, *b):
        return ((apply(p, *b[:-1]) - b[-1]) ** 2).mean()

    return _jax_step(loss, tx), [params, tx.init(params), *batch]


def _segments(rng, case):
    seg = np.sort(rng.integers(0, B, size=E))
    if case != "random":
        seg[seg == 2] = 1                                 # bag 2 empty
    return seg.astype(np.int32)


def _seg_inputs(case, rng):
    return [_ids(rng, case, shape=(E,)), _segments(rng, case), _labels(rng, case)]

