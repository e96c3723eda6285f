"""What an importer returns: an HLO module plus the values of parameters it binds itself
(TF variables captured by a function become entry parameters; their values travel here), the
names its parameters and outputs have in the source framework, and notices about choices made while
importing (an unknown dimension given a size)."""

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
    #: param no -> its name in the source framework (a signature input, a variable's name)
    source_names: dict[int, str] = dataclasses.field(default_factory=dict)
    notices: list[str] = dataclasses.field(default_factory=list)  # one line each
    #: the entry's outputs' names in order (a signature's output keys); empty: unnamed
    output_names: list[str] = dataclasses.field(default_factory=list)
    #: "name shape" of constants whose values the HLO text left out ({...}); only a model
    #: loaded for a command that needs no values (inspect) has any
    elided_constants: list[str] = dataclasses.field(default_factory=list)

    @property
    def free_parameters(self) -> list[int]:
        """Entry parameter numbers the caller must supply (all that are not bound)."""
        n = len(self.module.entry.params())
        return [i for i in range(n) if i not in self.bound]
