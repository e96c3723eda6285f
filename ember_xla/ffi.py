"""Registration of the compiled handlers of the ember custom-calls with XLA:CPU (typed FFI).

One table says which library implements which target (``custom_calls.TARGETS``, field
``library``); each library's owner provides its loader here when it is imported
(``ember_xla.native``: the kernels; ``ember_xla.emulator.cc_library``: the emulator's
``ember.emulate``). :func:`register_provided` registers every provided library's targets once;
a library provided as optional (the emulator's) is skipped when it is not built."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

from ember_xla.custom_calls import TARGETS

_lock = threading.Lock()
_loaders: dict[str, tuple[Callable[[], ctypes.CDLL], bool]] = {}
_registered: set[str] = set()


def provide(library: str, loader: Callable[[], ctypes.CDLL], required: bool = True) -> None:
    """``library`` (a ``custom_calls.Target.library`` name) is loaded by ``loader``."""
    with _lock:
        _loaders[library] = (loader, required)


def library(name: str) -> ctypes.CDLL:
    """The loaded library ``name`` (its provider must have been imported: ``ember_xla.native``
    provides ``kernels``); ``KeyError`` when none provides it."""
    with _lock:
        loader = _loaders[name][0]
    return loader()


def register(library: str) -> None:
    """Register the targets ``library`` implements (idempotent). The loader's ImportError
    propagates for a required library; an optional one that is missing is left out."""
    loader, required = _loaders[library]
    with _lock:
        if library in _registered:
            return
    try:
        lib = loader()
    except ImportError:
        if required:
            raise
        return
    import jax  # deferred: importing this module should not import jax

    with _lock:
        if library in _registered:
            return
        for name, target in TARGETS.items():
            if target.library == library:
                capsule = jax.ffi.pycapsule(getattr(lib, target.ffi_symbol))
                jax.ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)
        _registered.add(library)


def register_provided() -> None:
    """Register every provided library (before compiling a module that calls ember targets)."""
    for library in list(_loaders):
        register(library)
