"""Python packages a SavedModel needs imported before TensorFlow can load it (``--tf_import``):
those that register the types of its signatures' composite inputs (TF-GNN's
``GraphTensorSpec``, any ``tf.experimental.ExtensionType``) or define its custom ops; and the
one-line error that names the package when one is missing."""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence

from ember_xla.hlo.errors import HloImportError

_UNREGISTERED_TYPE = re.compile(r"The type '([\w.]+)' has not been registered")
_UNREGISTERED_OP = re.compile(r"Op type not registered '(\w+)'")


def first_line(e: BaseException) -> str:
    """The first line of ``e``'s message, or its type's name when it has none."""
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def import_packages(names: Sequence[str], where: str) -> None:
    """Import each package in ``names``; one that cannot be imported is a one-line error."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:  # an ImportError, or whatever the package raises on import
            raise HloImportError(f"--tf_import: cannot import {name}: {first_line(e)}",
                                 where) from None


def load_error(e: BaseException) -> str:
    """TensorFlow's error loading a SavedModel in one line: what to do when a package is
    missing (a registered type, the package being its name up to the class, or a custom op),
    else the error's first line."""
    message = str(e)
    t = _UNREGISTERED_TYPE.search(message)
    if t:
        package = t.group(1).rsplit(".", 1)[0]
        return (f"the type '{t.group(1)}' of its saved functions is not registered; import "
                f"the package that defines it with --tf_import={package}")
    op = _UNREGISTERED_OP.search(message)
    if op:
        return (f"the op '{op.group(1)}' is not registered; import the package that defines "
                "it with --tf_import=PACKAGE (e.g. tensorflow_text)")
    return f"TensorFlow could not load the SavedModel: {first_line(e)}"
