"""Registers the HLO dialect (verifier, text printer, text parser) with the IR core."""

from __future__ import annotations

from ember_xla.hlo.printer import print_module
from ember_xla.hlo.verifier import verify_module
from ember_xla.ir.dialect import Dialect, register_dialect


def _parse(text: str, path: str) -> object:
    from ember_xla.hlo.parser import parse_module

    return parse_module(text, path)


HLO = register_dialect(
    Dialect("hlo", print_module=print_module, parse_module=_parse, verify_module=verify_module)
)
