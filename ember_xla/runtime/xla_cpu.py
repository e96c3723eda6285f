"""The one place that touches private jaxlib APIs (pinned jax/jaxlib 0.10.x).

HloModuleProto bytes -> StableHLO (``hlo_to_stablehlo``) -> PjRt CPU executable -> execute.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np


class XlaError(RuntimeError):
    """XLA rejected a module when compiling or running it."""


@functools.cache
def _backend() -> tuple[Any, Any]:
    import jax
    import jax.extend.backend

    jax.config.update("jax_platforms", "cpu")
    be = jax.extend.backend.get_backend("cpu")
    return be, be.devices()[0]


class Executable:
    """A compiled module; call ``run(inputs)`` with numpy arrays in entry-parameter order."""

    def __init__(self, loaded: Any) -> None:
        self._loaded = loaded

    def run_device(self, inputs: list) -> list:
        """Run on arrays (numpy or jax); returns jax arrays on the CPU device."""
        import jax

        _, dev = _backend()
        try:
            with jax.enable_x64(True):  # else device_put narrows 64-bit inputs to 32 bits
                bufs = [jax.device_put(a, dev) for a in inputs]
            return self._loaded.execute(bufs)
        except Exception as e:
            raise XlaError(f"XLA:CPU execution failed: {e}") from None

    def optimized_hlo(self) -> str:
        """The HLO text of the module as XLA optimized it (fusions, copies, aliasing)."""
        return "\n".join(m.to_string() for m in self._loaded.hlo_modules())

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in self.run_device([np.asarray(a) for a in inputs])]


def compile_proto(proto: bytes, options: dict[str, bool | int | str] | None = None) -> Executable:
    """Compile serialized HloModuleProto bytes for the CPU; ``options`` are XLA debug options
    (e.g. ``{"xla_allow_excess_precision": False}``) overriding the defaults."""
    from jaxlib import _jax

    be, dev = _backend()
    opts = _jax.CompileOptions()
    if options:
        opts.env_option_overrides = sorted(options.items())
    try:
        mlir = _jax.mlir.hlo_to_stablehlo(proto)
        loaded = be.compile_and_load(mlir, _jax.DeviceList((dev,)), opts)
    except Exception as e:
        raise XlaError(f"XLA:CPU compilation failed: {e}") from None
    return Executable(loaded)


def xla_parse_text(text: str) -> bytes:
    """XLA's own HLO text parser (used to cross-check ours): text -> HloModuleProto bytes."""
    from jaxlib import _hlo

    try:
        return _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    except Exception as e:
        raise XlaError(f"XLA's HLO parser rejected the text: {e}") from None


def xla_proto_to_text(proto: bytes) -> str:
    """XLA's own printer: HloModuleProto bytes -> HLO text."""
    from jaxlib import _hlo

    return _hlo.HloModule.from_serialized_hlo_module_proto(proto).to_string()
