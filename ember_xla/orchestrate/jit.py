"""``ember_xla.jit(f)``: ``jax.jit`` whose compiled module runs ``f``'s embedding operations as
ember custom-calls.

Calls go through jax.jit's own C++ dispatch (``runtime/xla_cpu.rewriting_jit``): the same
signature handling (``static_argnums``/``static_argnames``, ``donate_argnums``/
``donate_argnames``, pytrees, weak-typed Python scalars, x64 off and on), the same cache key
and the same per-call cost; arrays already on the device are passed through. Without static
arguments the object returned IS jax's C++ jit function (``EmberJit.dispatcher``), so a call
costs exactly what a ``jax.jit`` call costs; with them a thin wrapper puts jax's error about an
unhashable static argument on one line. On a cache miss
``f`` is lowered exactly as ``jax.jit`` lowers it, the HLO is rewritten
(``rewrite_for(module, "cpu")``: forward clusters, and in a training step the backward clusters
and fused sparse optimizer updates) and the rewritten module is compiled with jax's own compile
arguments, donation (``input_output_alias``) included. When nothing is rewritten jax's own
module is compiled. The object returned:

- ``.reports``: signature text (``"f32[200,8], s32[50]; static: 3"``) -> the rewrite report
  of that compile (clusters, groups, near-misses with reasons; empty ``clusters`` when jax's
  module was kept, and ``kept_jax_module`` with the reason when the importer could not read
  it: jax's module is then compiled as it is, with a warning);
- ``.lower(*args)``: a ``jax.stages.Lowered`` of the rewritten module (``.as_text()``,
  ``.compile()``, ``.compiler_ir()``) with its ``.report``; ``.trace``, ``.eval_shape`` as
  jax's; ``.clear_cache()``.

Called under another transformation (with tracers: inside ``jax.grad``, ``jax.vmap`` or another
``jax.jit``) it is ``jax.jit(f)``, whose module the outer transformation owns: put
``ember_xla.jit`` outermost (``ember_xla.jit(train_step)`` with the ``jax.grad`` inside).

``ember_xla.jit(f, mode="emulate", target="tmu", level=3)`` instead runs every call with the
clusters on the emulated DAE machine (``orchestrate/emulate_model.py``, as ``ember-xla emulate``:
every cluster rewritten, outputs verified against ``f``'s own module) and returns the outputs;
the per-cluster timing report of the last call is ``.last_report`` (an
``emulator.report.EmulationReport``: ``.total_cycles``, ``.table()``, ``.as_dict()``). A
mismatch raises ``EmulationMismatch``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from ember_xla.runtime.xla_cpu import module_inputs, rewriting_jit, rewritten_lowering

log = logging.getLogger("ember_xla.jit")


class EmulationMismatch(AssertionError):
    """mode="emulate": the emulated outputs differ from the function's own."""


MODES = ("native", "emulate")

#: How jax's errors about the arguments themselves begin (before ``f`` runs).
_ARGUMENT_ERRORS = ("Non-hashable static arguments", "Error interpreting argument to")


def rewrite_hlo(proto: bytes, name: str) -> tuple[bytes | None, dict[str, Any]]:
    """The rewrite of one lowered function: (the module to compile, or None when no cluster is
    rewritten; the rewrite report). A module the importer cannot read (an instruction of a
    newer XLA than it knows) is jax's to compile as it is: the report's ``kept_jax_module``
    and a warning say why."""
    from ember_xla.hlo.errors import HloImportError
    from ember_xla.hlo_import.proto import module_from_proto
    from ember_xla.orchestrate.rewrite_model import rewrite_for
    from ember_xla.runtime.execute import executable_proto, register_called_targets

    try:
        module = module_from_proto(proto, f"jit:{name}")
    except HloImportError as e:
        why = " ".join(str(e).split())
        log.warning("ember_xla.jit(%s): jax's module is compiled as it is: %s", name, why)
        return None, {"module": name, "clusters": [], "groups": [], "near_misses": [],
                      "counters": {}, "kept_jax_module": why}
    result = rewrite_for(module, "cpu")
    report = result.report()
    if not result.clusters:
        log.info("ember_xla.jit(%s): nothing rewritten (%s)", name,
                 "; ".join(n["reason"] for n in result.near_misses[:3]) or "no gather found")
        return None, report
    log.info("ember_xla.jit(%s): %d embedding clusters rewritten", name, len(result.clusters))
    rewritten = executable_proto(result.module)
    register_called_targets(rewritten)
    return rewritten, report


class Lowered:
    """``jax.stages.Lowered`` of the rewritten module (every attribute is its), plus the
    rewrite ``report``."""

    def __init__(self, lowered: Any, report: dict[str, Any]) -> None:
        self._lowered = lowered
        self.report = report

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lowered, name)


class Traced:
    """``jax.stages.Traced`` (every attribute is its) whose ``lower()`` rewrites."""

    def __init__(self, traced: Any, name: str) -> None:
        self._traced, self._name = traced, name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._traced, name)

    def lower(self) -> Lowered:
        return Lowered(*rewritten_lowering(self._traced, self._name, rewrite_hlo))


class EmberJit:
    """The callable ``ember_xla.jit`` returns (see the module docstring)."""

    def __init__(self, fn: Callable, mode: str = "native", target: Any = "tmu",
                 level: int = 3, **jit_kwargs: Any) -> None:
        if mode not in MODES:
            raise ValueError(f"ember_xla.jit: mode={mode!r}; expected one of {MODES}")
        if not callable(fn):
            raise TypeError(f"ember_xla.jit: expected a function, got {type(fn).__name__}")
        self.mode, self.target, self.level = mode, target, level
        self.last_report: Any = None
        self.reports: dict[str, dict[str, Any]] = {}
        name = getattr(fn, "__name__", "fn")
        self._dispatch, self.plain = rewriting_jit(fn, jit_kwargs, rewrite_hlo,
                                                   self.reports.__setitem__,
                                                   f"ember_xla.jit({name})")
        self.__name__ = name
        functools.update_wrapper(self, fn, updated=())

    def dispatcher(self) -> Any:
        """jax's C++ jit function itself, carrying this object's attributes (``reports``,
        ``lower``, ``trace``, ``eval_shape``, ``clear_cache``, ``plain``): calls then cost
        exactly what ``jax.jit``'s cost, with no Python frame of ours in between. Only
        without static arguments, whose unhashable values jax's C++ reports on several
        lines (``__call__`` puts them on one)."""
        d = self._dispatch
        functools.update_wrapper(d, self.__wrapped__, updated=())
        for attr in ("mode", "target", "level", "last_report", "reports", "plain", "lower",
                     "trace", "eval_shape", "clear_cache"):
            setattr(d, attr, getattr(self, attr))
        return d

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "emulate":
            return self._emulate(args, kwargs)
        try:
            return self._dispatch(*args, **kwargs)
        except (TypeError, ValueError) as e:
            if str(e).startswith(_ARGUMENT_ERRORS):  # jax's words, on one line
                raise type(e)(f"ember_xla.jit({self.__name__}): "
                              + " ".join(str(e).split())) from None
            raise

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """A method when set on a class, as a jax.jit function is."""
        return self if obj is None else functools.partial(self, obj)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """The rewritten module for these arguments, as ``jax.jit(f).lower`` gives jax's."""
        return self.trace(*args, **kwargs).lower()

    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """jax's ``Traced`` (``.jaxpr``, ``.out_info``) whose ``.lower()`` is rewritten."""
        return Traced(self.plain.trace(*args, **kwargs), self.__name__)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        return self.plain.eval_shape(*args, **kwargs)

    def clear_cache(self) -> None:
        """Forget every compiled signature (and its report)."""
        self._dispatch._clear_cache()
        self.plain.clear_cache()
        self.reports.clear()

    def _cache_size(self) -> int:
        return self._dispatch._cache_size()

    def _emulate(self, args: tuple, kwargs: dict) -> Any:
        import jax
        import numpy as np

        from ember_xla.hlo_import.proto import module_from_proto
        from ember_xla.machines.config import Target, load_target
        from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
        from ember_xla.orchestrate.rewrite_model import rewrite_for

        proto, inputs, out_tree = module_inputs(self.plain, args, kwargs)
        original = module_from_proto(proto, f"jit:{self.__name__}")
        rewritten = rewrite_for(original, "dae").module
        target = self.target if isinstance(self.target, Target) else load_target(self.target)
        em = emulate_module(original, rewritten, [np.asarray(x) for x in inputs],
                            EmulateOptions(target, self.level), source=f"jit:{self.__name__}")
        self.last_report = em.report
        if not em.ok:
            raise EmulationMismatch(f"ember_xla.jit({self.__name__}, mode='emulate'): the "
                                    f"emulated outputs differ: {em.report.verify}")
        return jax.tree_util.tree_unflatten(out_tree, em.outputs)


def jit(fn: Callable | None = None, **jit_kwargs: Any) -> Any:
    """Like ``jax.jit`` (every ``jax.jit`` keyword); usable as ``@ember_xla.jit``,
    ``@ember_xla.jit(static_argnums=...)`` or ``ember_xla.jit(f)``. Also takes
    ``mode="native"|"emulate"``, ``target`` (a shipped name, a .toml path or a ``Target``) and
    ``level`` (0..4) for emulate mode (see the module docstring)."""
    if fn is None:
        return lambda f: _make(f, jit_kwargs)
    return _make(fn, jit_kwargs)


def _make(fn: Callable, jit_kwargs: dict[str, Any]) -> Any:
    f = EmberJit(fn, **jit_kwargs)
    static = jit_kwargs.get("static_argnums") is not None \
        or jit_kwargs.get("static_argnames") is not None
    return f if f.mode == "emulate" or static else f.dispatcher()
