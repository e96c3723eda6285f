"""Native XLA:CPU kernels for the ember custom-calls (see docs/CUSTOM_CALL.md).

The C++ typed-FFI handlers in this folder are compiled by ``pip install .`` (scikit-build-core +
CMake) into ``libember_kernels.so`` next to this file. In an editable install (``pip install -e
.``) the library is installed into site-packages while this file stays in the source tree; it is
then found through the package's ``__path__`` (scikit-build-core's redirecting finder lists the
install tree there) or the distribution's installed-file record. :func:`register_targets` loads that
library with ctypes and registers every handler with XLA for the CPU platform, after which
``jax.ffi.ffi_call`` or an HLO module containing ``custom-call(...),
custom_call_target="ember.<kind>", api_version=API_VERSION_TYPED_FFI`` can use them.

Operands per target: the table, the lookup operand(s), then an optional weights operand; its
presence must agree with the ``weighted`` attribute. All six attributes (``combiner``,
``index_mode``, ``wrap_negative``, ``weighted``, ``init``, ``index_bits``) are required.
``ember.grouped_segment_reduce`` takes k unweighted segment_reduce triples
``T_1, I_1, S_1, ..., T_k, I_k, S_k`` and returns a tuple of k results (one per table);
``ember.grouped_segment_reduce_concat`` takes the same and returns their concatenation along
dimension 1 as one ``[S, sum D]`` array, written in place by the kernel.

For kernel development, the environment variable ``EMBER_XLA_NATIVE_LIBRARY`` may name another
build of the library to load instead (e.g. one compiled by hand from this folder).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

from ember_xla.custom_calls import TARGETS as _REGISTRY

__all__ = ["TARGETS", "NativeLibraryMissing", "library_path", "load_library", "register_targets"]

LIBRARY_NAME = "libember_kernels.so"

#: custom_call_target name -> exported handler symbol in the library (ember_xla.custom_calls).
_SYMBOLS: dict[str, str] = {t.name: t.ffi_symbol for t in _REGISTRY.values()}

#: The custom_call_target names this package implements.
TARGETS: tuple[str, ...] = tuple(_SYMBOLS)

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_registered = False


class NativeLibraryMissing(ImportError):
    """The compiled kernel library was not found (package not built/installed)."""


def _candidates() -> list[Path]:
    """Where the installer may have put the library (ember_xla.util.libpath)."""
    from ember_xla.util import libpath

    return libpath.candidates(__file__, globals().get("__path__", []), LIBRARY_NAME)


def library_path() -> Path:
    """The compiled kernel library: ``$EMBER_XLA_NATIVE_LIBRARY`` when that is set, else the first
    existing candidate of :func:`_candidates` (next to this file, the package's ``__path__``,
    the installed distribution's file list), else where a regular install puts it."""
    override = os.environ.get("EMBER_XLA_NATIVE_LIBRARY")
    if override:
        return Path(override).resolve()
    candidates = _candidates()
    for p in candidates:
        if p.is_file():
            return p.resolve()
    return candidates[0]


def load_library() -> ctypes.CDLL:
    """Load (once) and return the compiled kernel library."""
    global _library
    with _lock:
        if _library is None:
            path = library_path()
            if not path.is_file():
                looked = ([path] if os.environ.get("EMBER_XLA_NATIVE_LIBRARY")
                          else _candidates())
                raise NativeLibraryMissing(
                    f"ember-xla's native kernels ({LIBRARY_NAME}) were not found (looked in "
                    f"{', '.join(str(c.parent) for c in looked)}). "
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
                if _REGISTRY[name].library == "emulator":  # the DAE emulator's own library
                    from ember_xla.emulator import fast

                    try:
                        emu = fast.load()
                    except fast.EmulatorLibraryMissing:
                        continue
                    capsule = jax.ffi.pycapsule(getattr(emu, symbol))
                    jax.ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)
                    continue
                capsule = jax.ffi.pycapsule(getattr(lib, symbol))
                jax.ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)
            _registered = True
    return TARGETS
