"""HLO from a JAX function and example arguments (``jax.jit(f).lower(*args)``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_xla.hlo_import.model import Model
from ember_xla.hlo_import.proto import module_from_proto


def hlo_proto_from_jax(fn: Callable, *args: Any, **kwargs: Any) -> bytes:
    import jax

    # a jitted function lowers with its own options (donate_argnums: the module's aliasing)
    jitted = fn if callable(getattr(fn, "lower", None)) else jax.jit(fn)
    lowered = jitted.lower(*args, **kwargs)
    return lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()


def from_jax(fn: Callable, *args: Any, **kwargs: Any) -> Model:
    """Import ``fn`` as it lowers for ``args`` (arrays or ``jax.ShapeDtypeStruct``s)."""
    name = getattr(fn, "__name__", "fn")
    return Model(module_from_proto(hlo_proto_from_jax(fn, *args, **kwargs), f"jax:{name}"),
                 f"jax:{name}")
