"""What an importer returns: an HLO module plus the values of parameters it binds itself
(TF variables captured by a function become entry parameters; their values travel here)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.ir.graph import Module


@dataclasses.dataclass
class Model:
    module: Module
    source: str                                   # file, directory or function it came from
    bound: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)  # param no -> value
    input_names: list[str] = dataclasses.field(default_factory=list)       # user inputs

    @property
    def free_parameters(self) -> list[int]:
        """Entry parameter numbers the caller must supply (all that are not bound)."""
        n = len(self.module.entry.params())
        return [i for i in range(n) if i not in self.bound]
