"""Load a model from a path: SavedModel directory, HloModuleProto (``.pb``), HLO text, a
StableHLO module (MLIR text such as ``jax.jit(f).lower(...).as_text()`` prints, or MLIR
bytecode; converted to HLO by XLA's own importer) or a ``jax.export`` serialization (its
StableHLO module), with the parameter values of a ``params.npz`` beside the file bound."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo.parser import Located, parse_module_located
from ember_xla.hlo.verifier import HloVerifyError, verify_module
from ember_xla.hlo_import.bound_params import bind_sibling_params
from ember_xla.hlo_import.model import Model
from ember_xla.hlo_import.output_names import read_sibling_output_names
from ember_xla.hlo_import.proto import module_from_proto
from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.graph import Module
from ember_xla.util.input_files import SpecialFileError, open_regular, refuse_special_tree

TEXT_SUFFIXES = (".hlo", ".txt", ".hlo.txt")
MLIR_SUFFIXES = (".mlir", ".mlirbc", ".stablehlo")
MLIR_BYTECODE_MAGIC = b"ML\xefR"
MAX_INPUT_BYTES = 2**31  # protobuf's own limit for one message


def max_input_bytes() -> int:
    try:
        return int(os.environ.get("EMBER_XLA_MAX_INPUT_BYTES", MAX_INPUT_BYTES))
    except ValueError:
        return MAX_INPUT_BYTES


def read_limited(path: str) -> bytes:
    """The file's bytes; refuses special files (a FIFO, /dev/zero) and more than
    ``max_input_bytes()``."""
    limit = max_input_bytes()
    try:
        with open_regular(path) as f:
            data = f.read(limit + 1)
    except SpecialFileError as e:
        raise HloImportError(f"is {e.kind}, not a regular file (reading it could block); "
                           "expected a model file or folder", path) from None
    except OSError as e:
        raise HloImportError(f"cannot read: {e.strerror}", path) from None
    if len(data) > limit:
        raise HloImportError(f"input is larger than {limit} bytes; expected an HLO module "
                           "(set EMBER_XLA_MAX_INPUT_BYTES to allow more)", path)
    return data


def load_models(path: str, signature: str | None = None, unknown_dim: int | str = 8,
                elided_ok: bool = False, tf_import: Sequence[str] = ()) -> list[Model]:
    """All models at ``path`` (one per serving signature for a SavedModel, loaded after
    importing the packages ``tf_import`` names). HLO text whose
    constants XLA printed without values (``{...}``) loads only with ``elided_ok`` (for
    commands that need no values); otherwise one error names them."""
    if not os.path.exists(path):
        raise HloImportError("no such file or directory", path)
    if os.path.isdir(path):
        from ember_xla.hlo_import.tf_source import from_saved_model

        try:
            refuse_special_tree(path)
        except SpecialFileError as e:
            raise HloImportError(f"holds {e.path}, which is {e.kind}, not a regular file; "
                               "refused (reading it could block)", path) from None
        models = list(from_saved_model(path, signature, unknown_dim, tf_import).values())
        for m in models:
            verified(m.module, path)
        return models
    data = read_limited(path)
    if not data:
        raise HloImportError("file is empty; expected HLO text or an HloModuleProto", path)
    if is_stablehlo(path, data):
        model = Model(verified(module_from_proto(stablehlo_proto(data, path), path), path), path)
    elif path.endswith(TEXT_SUFFIXES) or data.lstrip().startswith(b"HloModule"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HloImportError(f"HLO text is not UTF-8 (byte {e.start})", path) from None
        module, located = parse_module_located(text, path, elided_ok=True)
        if located.elided and not elided_ok:
            raise HloImportError(elided_message(located.elided), path)
        model = Model(verified(module, path, located), path,
                      elided_constants=list(located.elided))
    else:
        model = Model(verified(_proto_or_export(data, path), path), path)
    bind_sibling_params(model, path)
    read_sibling_output_names(model, path)
    return [model]


def _proto_or_export(data: bytes, path: str) -> Module:
    """An HloModuleProto, else the module of a ``jax.export`` serialization; the proto's error
    when it is neither."""
    try:
        return module_from_proto(data, path)
    except HloImportError:
        from ember_xla.hlo_import.stablehlo import StableHloError, exported_stablehlo

        try:
            text = exported_stablehlo(data)
        except StableHloError as e:
            raise HloImportError(f"cannot read this jax.export serialization: {e}", path
                                 ) from None
        if text is None:
            raise
        return module_from_proto(stablehlo_proto(text.encode(), path), path)


def is_stablehlo(path: str, data: bytes) -> bool:
    """MLIR bytecode, a ``.mlir`` file, or text whose first statement is an MLIR ``module``
    (after ``#loc`` aliases and comments)."""
    if data.startswith(MLIR_BYTECODE_MAGIC) or path.endswith(MLIR_SUFFIXES):
        return True
    for line in data[:65536].splitlines():
        s = line.strip()
        if not s or s.startswith((b"#loc", b"//")):
            continue
        return s.startswith((b"module", b"func.func"))
    return False


def stablehlo_proto(data: bytes, path: str) -> bytes:
    """The HloModuleProto XLA makes of a StableHLO module, or one ``HloImportError`` line."""
    from ember_xla.hlo_import.stablehlo import StableHloError, SymbolicShapes, stablehlo_to_proto

    try:
        return stablehlo_to_proto(data)
    except SymbolicShapes as e:
        raise HloImportError(str(e), path) from None
    except StableHloError as e:
        raise HloImportError(f"not a StableHLO module XLA can read ({e}); expected MLIR text "
                             "or bytecode such as jax.jit(f).lower(...).as_text() gives", path
                             ) from None


def elided_message(elided: list[str]) -> str:
    """The one line for a command that needs the values of elided constants."""
    shown = ", ".join(elided[:3]) + (f" and {len(elided) - 3} more" if len(elided) > 3 else "")
    return (f"{len(elided)} constant{'s' if len(elided) > 1 else ''} printed without "
            f"values ({{...}}): {shown}; this command needs them: export the HLO with "
            "constants in full (as_hlo_text(True)) or as an HloModuleProto (inspect reads it "
            "as is)")


def verified(module: Module, path: str, located: Located | None = None) -> Module:
    """``module`` if it passes the HLO verifier, else ``HloImportError`` naming the computation,
    the instruction and (for text) its line:column."""
    try:
        verify_module(module)
    except HloVerifyError as e:
        line, col = located.where(e.graph, e.op) if located and e.op else (0, 0)
        raise HloImportError(str(e), path, line, col) from None
    except VerifyError as e:
        raise HloImportError(str(e), path) from None
    return module


def load_model(path: str, signature: str | None = None, unknown_dim: int | str = 8,
               elided_ok: bool = False, tf_import: Sequence[str] = ()) -> Model:
    models = load_models(path, signature, unknown_dim, elided_ok, tf_import)
    if len(models) > 1:
        names = ", ".join(m.source for m in models)
        raise HloImportError(f"holds several signatures ({names}); choose one with --signature",
                           path)
    return models[0]
