"""Parameter values that travel with a module file: ``params.npz`` beside ``rewritten.pb`` /
``rewritten.hlo`` holds the values of the parameters the importer bound (a SavedModel's
variables), keyed by parameter name. Loading a module file binds the ``params.npz`` in its
folder, so a rewritten SavedModel runs with only the signature's inputs."""

from __future__ import annotations

import io
import os
import zipfile
import zlib

import numpy as np

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo_import.model import Model
from ember_xla.ir.graph import Module
from ember_xla.util.input_files import open_regular

PARAMS_FILE = "params.npz"


def npz_value(arr: np.ndarray, want: np.dtype) -> np.ndarray:
    """``arr`` as read from an .npz for a parameter of type ``want``: ``np.savez`` stores the
    types numpy lacks (bfloat16 and the float8s of ``ml_dtypes``) as raw bytes (``|V2``,
    ``|V1``), which are read back as ``want`` when the sizes agree; anything else unchanged."""
    if arr.dtype.kind == "V" and arr.dtype.names is None and arr.dtype != want \
            and arr.dtype.itemsize == want.itemsize and want.kind in "Vf":
        return arr.view(want)
    return arr


def _by_number(module: Module) -> dict[int, object]:
    return {p.attributes.get("parameter_number", 0): p for p in module.entry.params()}


def params_npz(module: Module, bound: dict[int, np.ndarray]) -> bytes:
    """The ``params.npz`` bytes for ``bound`` (parameter number -> value), keyed by the names
    the parameters have in ``module``."""
    params = _by_number(module)
    arrays = {}
    for num in sorted(bound):
        if num not in params:
            raise ValueError(f"bound parameter {num} is not a parameter of {module.name}")
        arrays[params[num].name] = np.asarray(bound[num])
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def bind_sibling_params(model: Model, path: str) -> None:
    """Bind the values of the ``params.npz`` beside the module file ``path`` (if there is
    one) to the parameters of the same names; a key naming no parameter, or a value of the
    wrong shape or type, is an ``HloImportError``."""
    npz = os.path.join(os.path.dirname(os.path.abspath(path)), PARAMS_FILE)
    if not os.path.isfile(npz):
        return
    try:
        with open_regular(npz) as f:
            data = np.load(io.BytesIO(f.read()), allow_pickle=False)
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        msg = " ".join(str(e).split())[:200]
        raise HloImportError(f"cannot read the parameter values beside the module "
                             f"({type(e).__name__}: {msg})", npz) from None
    by_name = {p.name: (num, p) for num, p in _by_number(model.module).items()}
    for key, arr in sorted(arrays.items()):
        if key not in by_name:
            raise HloImportError(f"holds {key!r}, which names no parameter of {path}; "
                                 "expected the params.npz its rewrite wrote", npz)
        num, p = by_name[key]
        want = p.result.type
        arr = npz_value(arr, want.dtype)
        if tuple(arr.shape) != want.dims or arr.dtype != want.dtype:
            raise HloImportError(f"value of {key!r} is {arr.dtype}{list(arr.shape)}, the "
                                 f"parameter is {want}", npz)
        model.bound[num] = arr
