"""Native XLA:CPU kernels for the ember custom-calls (see docs/CUSTOM_CALL.md).

The C++ typed-FFI handlers in this folder are compiled by ``pip install .`` (scikit-build-core +
CMake) into ``libember_kernels.so`` next to this file. :func:`register_targets` loads that
library with ctypes and registers every handler with XLA for the CPU platform, after which
``jax.ffi.ffi_call`` or an HLO module containing ``custom-call(...),
custom_call_target="ember.<kind>", api_version=API_VERSION_TYPED_FFI`` can use them.

Operands per target: the table, the lookup operand(s), then an optional weights operand; its
presence must agree with the ``weighted`` attribute. All six attributes (``combiner``,
``index_mode``, ``wrap_negative``, ``weighted``, ``init``, ``index_bits``) are required.
``ember.grouped_segment_reduce`` takes k unweighted segment_reduce triples
``T_1, I_1, S_1, ..., T_k, I_k, S_k`` and returns a tuple of k results (one per table).

For kernel development, the environment variable ``EMBER_XLA_NATIVE_LIBRARY`` may name another
build of the library to load instead (e.g. one compiled by hand from this folder).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

from ember_xla.targets import TARGETS as _REGISTRY

__all__ = ["TARGETS", "NativeLibraryMissing", "library_path", "load_library", "register_targets"]

LIBRARY_NAME = "libember_kernels.so"

#: custom_call_target name -> exported handler symbol in the library (ember_xla.targets).
_SYMBOLS: dict[str, str] = {t.name: t.ffi_symbol for t in _REGISTRY.values()}

#: The custom_call_target names this package implements.
TARGETS: tuple[str, ...] = tuple(_SYMBOLS)

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_registered = False


class NativeLibraryMissing(ImportError):
    """The compiled kernel library is not next to this module (package not built/installed)."""


def library_path() -> Path:
    """Where the compiled kernel library is expected: inside this package folder (or the path
    in ``$EMBER_XLA_NATIVE_LIBRARY`` when that is set)."""
    override = os.environ.get("EMBER_XLA_NATIVE_LIBRARY")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().with_name(LIBRARY_NAME)


def load_library() -> ctypes.CDLL:
    """Load (once) and return the compiled kernel library."""
    global _library
    with _lock:
        if _library is None:
            path = library_path()
            if not path.is_file():
                raise NativeLibraryMissing(
                    f"ember-xla's native kernels ({LIBRARY_NAME}) were not found in {path.parent}. "
                    "They are compiled when the package is installed: run `pip install .` in the "
                    "ember-xla source tree (and import ember_xla from the installed package, not "
                    "from the source folder)."
                )
            _library = ctypes.CDLL(str(path))
        return _library


def register_targets() -> tuple[str, ...]:
    """Register every ember target with XLA:CPU (typed FFI). Idempotent; returns TARGETS."""
    global _registered
    lib = load_library()
    import jax  # deferred: importing this module should not import jax

    with _lock:
        if not _registered:
            for name, symbol in _SYMBOLS.items():
                capsule = jax.ffi.pycapsule(getattr(lib, symbol))
                jax.ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)
            _registered = True
    return TARGETS
