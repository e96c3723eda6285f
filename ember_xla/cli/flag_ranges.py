"""Range checks of every numeric flag, after absl parsed them and before a command runs: an
integer must fit the C++ type that receives it (int64 everywhere, tighter where a flag counts
loop trips or processes), a float must be finite (absl's ``lower_bound=0.0`` lets ``nan``
through, since ``nan < 0`` is false). A value out of range is one ``UsageError`` line."""

from __future__ import annotations

import math
from typing import Any

from ember_xla.hlo_import.unknown_dims import UnknownDims, UnknownDimsError
from ember_xla.orchestrate.errors import UsageError

INT64 = (-(2**63), 2**63 - 1)
BOUNDS: dict[str, tuple[int, int]] = {  # flag -> [lo, hi]; others: their absl bound, int64
    "seed": (0, 2**63 - 1),
    "repeat": (0, 2**31 - 1),
    "timing_repeats": (1, 2**31 - 1),
    "cluster": (0, 2**31 - 1),
    "verify_elements": (0, 2**63 - 1),
    "workers": (1, 1024),
    "memory_mb": (0, 2**43),  # MB: 2^63 bytes
    "batch_size": (1, 2**31 - 1),
}


def _ours(flag_values: Any) -> list[Any]:
    out = []
    for module, flag_list in flag_values.flags_by_module_dict().items():
        if module.startswith("ember_xla") or module == "__main__":
            out.extend(flag_list)
    return out


def check_flag_ranges(flag_values: Any) -> None:
    """Raise ``UsageError`` naming the first numeric flag of ember-xla out of its range."""
    for fl in sorted(_ours(flag_values), key=lambda f: f.name):
        v = fl.value
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int):
            lo, hi = BOUNDS.get(fl.name, INT64)
            if not lo <= v <= hi:
                raise UsageError(f"--{fl.name}={v}: out of range, expected an integer in "
                                 f"[{lo}, {hi}]")
        elif isinstance(v, float) and not math.isfinite(v):
            raise UsageError(f"--{fl.name}={v}: expected a finite number")
    if "unknown_dim" in flag_values:  # sizes written as text: N,INPUT:AXIS=SIZE,...
        try:
            UnknownDims.parse(flag_values["unknown_dim"].value)
        except UnknownDimsError as e:
            raise UsageError(str(e)) from None
