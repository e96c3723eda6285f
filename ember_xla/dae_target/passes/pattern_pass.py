"""The shape of a pass that is one rewrite pattern applied greedily: the pattern is built with
the pass's ``PassReport`` (it records each change and each refusal there) and the pass
returns that report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from ember_xla.dae_target.passes.slcv_util import PassReport
from ember_xla.ir.graph import Module
from ember_xla.ir.passes import ModulePass
from ember_xla.ir.rewriter import RewritePattern, count_edits


@dataclasses.dataclass(frozen=True)
class ReportingPatternPass(ModulePass):
    """Base class: a subclass names the pass (``name``) and its pattern (``pattern``, called
    with the report). A subclass without options of its own is still a frozen dataclass (it
    inherits this one's), so it needs no decorator but ``register_pass``."""

    pattern: ClassVar[Callable[[PassReport], RewritePattern]]

    def apply(self, module: Module) -> PassReport:
        report = PassReport(self.name)
        count_edits(module, [type(self).pattern(report)])
        return report
