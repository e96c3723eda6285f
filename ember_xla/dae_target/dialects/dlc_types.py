"""The ``dlc`` dialect object, its events and its type ``!dlc.tu``: what the access-side ops
(``dlc.py``), the core-side ops (``dlc_compute.py``) and the engine analysis (``dlc_engine.py``)
share."""

from __future__ import annotations

import dataclasses

from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.types import DialectType

dlc = register_dialect(Dialect("dlc"))

EVENTS = ("begin", "iter", "end")


@dlc.add_type
@dataclasses.dataclass(frozen=True)
class TUType(DialectType):
    """``!dlc.tu``."""

    type_name = "dlc.tu"

    def __post_init__(self) -> None:
        if self.name != self.type_name or self.params:
            raise ValueError("!dlc.tu takes no parameters")


TU = TUType("dlc.tu")
