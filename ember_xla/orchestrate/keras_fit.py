"""``ember_xla.compile_keras(model)``: a Keras 3 model on the JAX backend whose ``fit``,
``evaluate`` and ``predict`` compile their steps with ``ember_xla.jit`` instead of ``jax.jit``.

Keras' JAX trainer builds each step function lazily (``make_train_function`` and its test and
predict siblings) with a module-level ``jit``; the model's own three ``make_*_function``
methods are replaced by ones that run Keras' with that name bound to ``ember_xla.jit`` (jax's
C++ dispatch, so a step costs what a ``jax.jit`` step costs), and Keras does the rest as
always: donation of the state, ``steps_per_execution``, callbacks, metrics. A training step's
lookups, their gradients and a fused sparse optimizer update are rewritten as in
``ember_xla.jit``; what was rewritten is in the handle's ``reports``. This module is the only
one that reads Keras' private trainer module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_xla.orchestrate.jit import EmberJit
from ember_xla.util.attribute_bound import attribute_bound

_MAKERS = ("make_train_function", "make_test_function", "make_predict_function")


class KerasError(ValueError):
    """The model cannot compile through ember_xla (the one-line reason)."""


class KerasRewrite:
    """The handle ``compile_keras`` returns: ``model`` and the ember_xla.jit functions its
    steps were compiled with (``reports``: ``"train (train_step)"`` -> signature -> rewrite
    report; Keras also jits a helper that concatenates ``predict``'s batches)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.jits: list[tuple[str, EmberJit]] = []

    @property
    def reports(self) -> dict[str, dict[str, dict[str, Any]]]:
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for step, j in self.jits:
            out.setdefault(f"{step} ({j.__name__})", {}).update(j.reports)
        return out

    def clusters(self) -> list[dict[str, Any]]:
        """Every rewritten cluster of every step compiled so far."""
        return [c for r in self.reports.values() for rep in r.values() for c in rep["clusters"]]


def _trainer_module() -> Any:
    from keras.src.backend.jax import trainer

    return trainer


def _check(model: Any) -> None:
    import keras

    if keras.backend.backend() != "jax":
        raise KerasError(
            f"ember_xla.compile_keras: Keras runs on the {keras.backend.backend()!r} backend; "
            "ember_xla compiles JAX steps (set KERAS_BACKEND=jax before importing keras)")
    from keras.src.backend.config import is_nnx_enabled

    if is_nnx_enabled():
        raise KerasError("ember_xla.compile_keras: Keras' flax-nnx mode compiles with nnx.jit, "
                         "which ember_xla does not replace; turn it off (keras.config."
                         "set_nnx_enabled(False))")
    if not isinstance(model, keras.Model):
        raise KerasError(f"ember_xla.compile_keras: expected a keras.Model, got "
                         f"{type(model).__name__}")
    if not getattr(model, "compiled", False):
        raise KerasError("ember_xla.compile_keras: call model.compile(...) first")
    if model.run_eagerly or not model.jit_compile:
        raise KerasError("ember_xla.compile_keras: the model is compiled with "
                         f"run_eagerly={model.run_eagerly}, jit_compile={model.jit_compile}; "
                         "its steps are not jitted, so there is nothing to rewrite")


def compile_keras(model: Any) -> KerasRewrite:
    """Make ``model``'s ``fit`` / ``evaluate`` / ``predict`` compile through ember_xla.jit
    (after ``model.compile``; a later ``model.compile`` keeps it). Returns the handle whose
    ``reports`` say what each compiled step rewrote."""
    _check(model)
    handle = KerasRewrite(model)
    for maker in _MAKERS:
        original = getattr(type(model), maker)
        step = maker.removeprefix("make_").removesuffix("_function")

        def make_function(force: bool = False, _original: Callable = original,
                          _step: str = step) -> Any:
            def ember_jit(fn: Callable, **kwargs: Any) -> Any:
                j = EmberJit(fn, **kwargs)
                handle.jits.append((_step, j))
                return j.dispatcher()

            with attribute_bound(_trainer_module(), "jit", ember_jit):
                return _original(model, force)

        object.__setattr__(model, maker, make_function)
    for attr in ("train_function", "test_function", "predict_function"):
        if getattr(model, attr, None) is not None:  # built by jax.jit before: build again
            object.__setattr__(model, attr, None)
    return handle
