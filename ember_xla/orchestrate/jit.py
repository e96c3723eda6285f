"""``ember_xla.jit(f)``: a drop-in for ``jax.jit`` for inference functions.

Per input signature it lowers ``f`` with ``jax.jit``, rewrites the embedding clusters of the HLO
into ember custom-calls, compiles the rewritten module on XLA:CPU with the native targets
registered, and caches the executable. When nothing matches (or ``f`` is called under another
JAX transformation) it is plain ``jax.jit(f)``, and the reason is logged once.

``ember_xla.jit(f, mode="emulate", target="tmu", level=3)`` instead runs every call with the
clusters on the emulated DAE machine (``orchestrate/emulate_model.py``, as ``ember-xla emulate``:
every cluster rewritten, outputs verified against ``f``'s own module) and returns the outputs;
the per-cluster timing report of the last call is ``.last_report`` (an
``emulator.report.EmulationReport``: ``.total_cycles``, ``.table()``, ``.as_dict()``). A
mismatch raises ``EmulationMismatch``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("ember_xla.jit")


class _Compiled:
    def __init__(self, executable: Any, out_tree: Any, report: dict[str, Any]) -> None:
        self.executable = executable
        self.out_tree = out_tree
        self.report = report


class EmulationMismatch(AssertionError):
    """mode="emulate": the emulated outputs differ from the function's own."""


MODES = ("native", "emulate")


class EmberJit:
    """The callable ``ember_xla.jit`` returns; ``reports`` maps signatures to rewrite reports;
    in emulate mode ``last_report`` is the timing report of the last call."""

    def __init__(self, fn: Callable, mode: str = "native", target: Any = "tmu",
                 level: int = 3, **jit_kwargs: Any) -> None:
        import jax

        if mode not in MODES:
            raise ValueError(f"ember_xla.jit: mode={mode!r}; expected one of {MODES}")
        self.mode, self.target, self.level = mode, target, level
        self.last_report: Any = None
        self.fn = fn
        self.plain = jax.jit(fn, **jit_kwargs)
        self._cache: dict[Any, _Compiled | None] = {}
        self.reports: dict[Any, dict[str, Any]] = {}
        self.__name__ = getattr(fn, "__name__", "fn")
        self.__doc__ = getattr(fn, "__doc__", None)

    def _signature(self, args: tuple, kwargs: dict) -> Any:
        import jax

        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        return tree, tuple((getattr(x, "shape", ()), str(getattr(x, "dtype", type(x))))
                           for x in leaves)

    def _compile(self, args: tuple, kwargs: dict) -> _Compiled | None:
        from ember_xla.hlo_import.proto import module_from_proto
        from ember_xla.orchestrate.rewrite_model import rewrite_for
        from ember_xla.runtime.execute import compile_module

        lowered = self.plain.lower(*args, **kwargs)
        proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
        result = rewrite_for(module_from_proto(proto, f"jit:{self.__name__}"), "cpu")
        if not result.clusters:
            reasons = "; ".join(n["reason"] for n in result.near_misses[:3]) or "no gather found"
            log.info("ember_xla.jit(%s): nothing to rewrite (%s); using jax.jit", self.__name__,
                     reasons)
            return None
        log.info("ember_xla.jit(%s): %d embedding clusters rewritten", self.__name__,
                 len(result.clusters))
        return _Compiled(compile_module(result.module), lowered.out_tree, result.report())

    def _emulate(self, args: tuple, kwargs: dict, leaves: list) -> Any:
        import jax
        import numpy as np

        from ember_xla.hlo_import.proto import module_from_proto
        from ember_xla.machines.config import Target, load_target
        from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
        from ember_xla.orchestrate.rewrite_model import rewrite_for

        lowered = self.plain.lower(*args, **kwargs)
        proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
        original = module_from_proto(proto, f"jit:{self.__name__}")
        rewritten = rewrite_for(original, "dae").module
        target = self.target if isinstance(self.target, Target) else load_target(self.target)
        em = emulate_module(original, rewritten, [np.asarray(x) for x in leaves],
                            EmulateOptions(target, self.level), source=f"jit:{self.__name__}")
        self.last_report = em.report
        if not em.ok:
            raise EmulationMismatch(f"ember_xla.jit({self.__name__}, mode='emulate'): the "
                                    f"emulated outputs differ: {em.report.verify}")
        return jax.tree_util.tree_unflatten(lowered.out_tree, em.outputs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            return self.plain(*args, **kwargs)  # inside another transformation: plain jit
        if self.mode == "emulate":
            return self._emulate(args, kwargs, leaves)
        key = self._signature(args, kwargs)
        if key not in self._cache:
            self._cache[key] = self._compile(args, kwargs)
            if self._cache[key] is not None:
                self.reports[key] = self._cache[key].report
        compiled = self._cache[key]
        if compiled is None:
            return self.plain(*args, **kwargs)
        outs = compiled.executable.run_device(leaves)
        return jax.tree_util.tree_unflatten(compiled.out_tree, outs)


def jit(fn: Callable | None = None, **jit_kwargs: Any) -> Any:
    """Like ``jax.jit``; usable as ``@ember_xla.jit`` or ``ember_xla.jit(f)``. Also takes
    ``mode="native"|"emulate"``, ``target`` (a shipped name, a .toml path or a ``Target``) and
    ``level`` (0..4) for emulate mode (see the module docstring)."""
    if fn is None:
        return lambda f: EmberJit(f, **jit_kwargs)
    return EmberJit(fn, **jit_kwargs)
