"""Load a model from a path: SavedModel directory, HloModuleProto (``.pb``) or HLO text."""

from __future__ import annotations

import os

from ember_xla.hlo_import.errors import ImportError_
from ember_xla.hlo_import.model import Model
from ember_xla.hlo_import.proto import module_from_proto
from ember_xla.hlo_import.text import parse_module

TEXT_SUFFIXES = (".hlo", ".txt", ".hlo.txt")


def load_models(path: str, signature: str | None = None, unknown_dim: int = 8) -> list[Model]:
    """All models at ``path`` (one per serving signature for a SavedModel)."""
    if not os.path.exists(path):
        raise ImportError_("no such file or directory", path)
    if os.path.isdir(path):
        from ember_xla.hlo_import.tf_source import from_saved_model

        return list(from_saved_model(path, signature, unknown_dim).values())
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ImportError_(f"cannot read: {e.strerror}", path) from None
    if not data:
        raise ImportError_("file is empty; expected HLO text or an HloModuleProto", path)
    if path.endswith(TEXT_SUFFIXES) or data.lstrip().startswith(b"HloModule"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ImportError_(f"HLO text is not UTF-8 (byte {e.start})", path) from None
        return [Model(parse_module(text, path), path)]
    return [Model(module_from_proto(data, path), path)]


def load_model(path: str, signature: str | None = None, unknown_dim: int = 8) -> Model:
    models = load_models(path, signature, unknown_dim)
    if len(models) > 1:
        names = ", ".join(m.source for m in models)
        raise ImportError_(f"holds several signatures ({names}); choose one with --signature",
                           path)
    return models[0]
