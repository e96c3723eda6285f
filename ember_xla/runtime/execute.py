"""Run an HLO ``ir.Module`` on XLA:CPU: export to proto, legalize if needed, compile (cached),
execute on numpy inputs."""

from __future__ import annotations

import hashlib

import numpy as np

from ember_xla.hlo_import.proto import module_from_dict, module_to_dict, module_to_proto
from ember_xla.ir.graph import Module
from ember_xla.ir.passes import PassPipeline
from ember_xla.runtime.legalize import EXECUTION_PIPELINE, needs_legalization
from ember_xla.runtime.xla_cpu import Executable, compile_proto

_CACHE: dict[str, Executable] = {}


def clone_module(module: Module) -> Module:
    """A deep copy (through the proto-dict form, which keeps names and ids)."""
    return module_from_dict(module_to_dict(module))


def executable_proto(module: Module) -> bytes:
    """The HloModuleProto XLA:CPU compiles for ``module`` (legalized when needed)."""
    if needs_legalization(module):
        module = clone_module(module)
        PassPipeline.from_spec(EXECUTION_PIPELINE).apply(module)
    return module_to_proto(module)


def compile_module(module: Module, options: dict[str, bool | int | str] | None = None,
                   cache: bool = True) -> Executable:
    """XLA:CPU's executable for ``module`` (kept for the next call with the same module and
    options unless ``cache`` is False: a module compiled once to be read)."""
    proto = executable_proto(module)
    if cache:
        return compile_proto_cached(proto, options)
    register_called_targets(proto)
    return compile_proto(proto, options)


def compile_proto_cached(proto: bytes, options: dict[str, bool | int | str] | None = None
                         ) -> Executable:
    key = hashlib.sha256(proto + repr(sorted((options or {}).items())).encode()).hexdigest()
    if key not in _CACHE:
        register_called_targets(proto)
        _CACHE[key] = compile_proto(proto, options)
    return _CACHE[key]


def register_called_targets(proto: bytes) -> None:
    """Register the ember targets with XLA before compiling a module that calls them."""
    if b"ember." in proto:
        from ember_xla import ffi
        from ember_xla.native import register_targets
        from ember_xla.runtime.xla_cpu import cache_result_buffers

        register_targets()
        ffi.register_provided()  # and the emulator's ember.emulate, once it is imported
        cache_result_buffers()


def run_module(module: Module, inputs: list[np.ndarray],
               options: dict[str, bool | int | str] | None = None) -> list[np.ndarray]:
    """Compile ``module`` for the CPU (with XLA debug ``options``, if any) and run it; returns
    the flattened outputs."""
    n = len(module.entry.params())
    if len(inputs) != n:
        raise ValueError(f"module {module.name} takes {n} inputs, got {len(inputs)}")
    return compile_module(module, options).run(inputs)
