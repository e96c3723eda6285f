"""Entry parameters named after what they hold (a TF signature input, a variable's path):
names spelled as HLO identifiers and unique module-wide, as XLA requires."""

from __future__ import annotations

import re

from ember_xla.ir.graph import Module

_BAD = re.compile(r"[^A-Za-z0-9_.\-]+")


def hlo_identifier(name: str) -> str:
    """``name`` spelled as an HLO instruction name: ``emb_a/embeddings:0`` ->
    ``emb_a.embeddings`` (a trailing TF output index dropped, other characters outside
    ``[A-Za-z0-9_.-]`` become ``.``; a name that cannot start an identifier gets ``p_``)."""
    name = re.sub(r":\d+$", "", name)
    name = _BAD.sub(".", name).strip(".") or "param"
    return name if re.match(r"[A-Za-z_]", name) else f"p_{name}"


def name_parameters(module: Module, names: dict[int, str]) -> dict[int, str]:
    """Rename entry parameters (by parameter number) to ``hlo_identifier(name)``, suffixed
    ``.N`` when another instruction of the module has that name; returns the names given."""
    entry = module.entry
    params = {p.attributes.get("parameter_number", 0): p for p in entry.params()}
    renamed = {id(params[n]) for n in names if n in params}
    taken = {op.name for g in module.graphs for op in g.ops if id(op) not in renamed}
    given: dict[int, str] = {}
    for num in sorted(names):
        if num not in params:
            continue
        stem = hlo_identifier(names[num])
        new, k = stem, 1
        while new in taken:
            new, k = f"{stem}.{k}", k + 1
        taken.add(new)
        given[num] = new
    for num in given:  # old names go first: a new name may be another parameter's old one
        entry._names.discard(params[num].name)
    for num, new in given.items():
        params[num].name = new
        entry._names.add(new)
    return given
