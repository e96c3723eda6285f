"""The MODEL argument of a command: loaded with ``--signature``, ``--unknown_dim`` and
``--tf_import``, every
import notice (an unknown dimension given a size, and how to choose another) on stderr."""

from __future__ import annotations

import sys
from typing import Any

from ember_xla.hlo_import.model import Model


def load_arg(path: str, flags: Any, one: bool = False, elided_ok: bool = False
             ) -> list[Model]:
    """The models at ``path`` (exactly one with ``one``, else one per signature); HLO text
    with elided constants only with ``elided_ok`` (a command that needs no values)."""
    from ember_xla.hlo_import.load import load_model, load_models

    how = (flags.signature, flags.unknown_dim, elided_ok, flags.tf_import)
    models = [load_model(path, *how)] if one else load_models(path, *how)
    for m in models:
        for n in m.notices:
            print(f"ember-xla: note: {n}", file=sys.stderr)
    return models
