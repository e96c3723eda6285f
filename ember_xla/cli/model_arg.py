"""The MODEL argument of a command: loaded with ``--signature`` and ``--unknown_dim``, every
import notice (an unknown dimension given a size, and how to choose another) on stderr."""

from __future__ import annotations

import sys
from typing import Any

from ember_xla.hlo_import.model import Model


def load_arg(path: str, flags: Any, one: bool = False) -> list[Model]:
    """The models at ``path`` (exactly one with ``one``, else one per signature)."""
    from ember_xla.hlo_import.load import load_model, load_models

    models = ([load_model(path, flags.signature, flags.unknown_dim)] if one
              else load_models(path, flags.signature, flags.unknown_dim))
    for m in models:
        for n in m.notices:
            print(f"ember-xla: note: {n}", file=sys.stderr)
    return models
