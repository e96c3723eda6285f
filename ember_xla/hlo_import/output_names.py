"""Output names that travel with a module file: ``outputs.json`` beside ``rewritten.pb`` /
``rewritten.hlo`` lists the names of the entry's outputs in order (a SavedModel signature's
output keys). Loading a module file reads the ``outputs.json`` in its folder, so ``run`` labels
and saves a rewritten SavedModel's outputs by the signature's names."""

from __future__ import annotations

import json
import os

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo_import.model import Model
from ember_xla.util.input_files import open_regular

OUTPUTS_FILE = "outputs.json"
MAX_BYTES = 1 << 20


def outputs_json(names: list[str]) -> str:
    """The ``outputs.json`` text for the output ``names``."""
    return json.dumps({"outputs": list(names)}, indent=1) + "\n"


def read_sibling_output_names(model: Model, path: str) -> None:
    """Set ``model.output_names`` from the ``outputs.json`` beside the module file ``path``
    (if there is one); a file that is not a list of distinct strings is an
    ``HloImportError``."""
    sidecar = os.path.join(os.path.dirname(os.path.abspath(path)), OUTPUTS_FILE)
    if not os.path.isfile(sidecar):
        return
    try:
        with open_regular(sidecar) as f:
            doc = json.loads(f.read(MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError) as e:
        msg = " ".join(str(e).split())[:200]
        raise HloImportError(f"cannot read the output names beside the module "
                             f"({type(e).__name__}: {msg})", sidecar) from None
    names = doc.get("outputs") if isinstance(doc, dict) else None
    if (not isinstance(names, list) or not all(isinstance(n, str) and n for n in names)
            or len(set(names)) != len(names)):
        raise HloImportError('expected {"outputs": [distinct non-empty names]}, as rewrite '
                             "writes it", sidecar)
    model.output_names = names
