"""``ember_xla.nnx_jit``: ``flax.nnx.jit`` whose compiled function is ``ember_xla.jit``'s.

``nnx.jit`` turns a function of modules (a training step that mutates the model and its
optimizer in place) into a pure function of their state, jits that with ``jax.jit`` and
writes the updated state back. ``nnx_jit`` builds the very same ``nnx.jit`` object with its
``jax.jit`` bound to ``ember_xla.jit`` dispatchers, so the step's lookups, their gradients and
a fused sparse optimizer update are rewritten while nnx keeps the mutations. Every ``nnx.jit``
keyword is passed through. The returned object's ``ember_reports`` maps each compile's
signature text to its rewrite report. This module is the only one that reads flax's
private ``flax.nnx.transforms.compilation``.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any

from ember_xla.orchestrate.jit import EmberJit
from ember_xla.util.attribute_bound import attribute_bound


class _JaxWithEmberJit:
    """The ``jax`` module as nnx's compilation module sees it while an ``nnx.jit`` is built:
    every attribute jax's, except ``jit``."""

    def __init__(self, jax: Any, jit: Callable[..., Any]) -> None:
        self._jax, self.jit = jax, jit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jax, name)


def nnx_jit(fun: Callable | None = None, **nnx_jit_kwargs: Any) -> Any:
    """``flax.nnx.jit(fun, **nnx_jit_kwargs)`` compiled through ``ember_xla.jit``; usable as
    ``@nnx_jit`` and ``@nnx_jit(donate_argnums=...)`` like ``nnx.jit``."""
    if fun is None:
        return functools.partial(nnx_jit, **nnx_jit_kwargs)
    from flax import nnx
    from flax.nnx.transforms import compilation

    jits: list[EmberJit] = []

    def ember_jit(fn: Callable, **jit_kwargs: Any) -> Any:
        jits.append(EmberJit(fn, **jit_kwargs))
        return jits[-1].dispatcher()

    with attribute_bound(compilation, "jax", _JaxWithEmberJit(compilation.jax, ember_jit)):
        wrapped = nnx.jit(fun, **nnx_jit_kwargs)
    # a live view of the reports of every function this nnx.jit compiles (one, today)
    wrapped.ember_reports = collections.ChainMap(*(j.reports for j in jits))
    return wrapped
