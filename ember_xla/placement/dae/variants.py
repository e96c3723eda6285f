"""The DAE program variants the compiler emits for one cluster and placement chooses among:
the optimization level (Ember's ladder) and the vector length of the access streams and
callbacks. A variant is a pass pipeline of ``dae_target.passes.levels``."""

from __future__ import annotations

from ember_xla.dae_target.passes.levels import LEVELS

DEFAULT = "O3"


def _vl(pipeline: str, vl: int) -> str:
    return pipeline.replace("vectorize{vl=8}", f"vectorize{{vl={vl}}}")


VARIANTS: dict[str, str] = {
    "O3": LEVELS[3],
    "O3-vl16": _vl(LEVELS[3], 16),
    "O3-vl4": _vl(LEVELS[3], 4),
    "O2": LEVELS[2],
    "O1": LEVELS[1],
}


def pipeline(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"unknown program variant {variant!r} (expected one of "
                         f"{', '.join(VARIANTS)})")
    return VARIANTS[variant]
