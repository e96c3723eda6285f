"""What a successful match produces: a cluster (root, owned ops, inputs, custom-call attributes)
and what a failed one produces: a near-miss with its reason."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.ir.operation import Operation
from ember_xla.ir.value import Value


@dataclasses.dataclass
class Cluster:
    kind: str                       # segment_reduce | padded_bag | scatter_grad
    pattern: str                    # the pattern that matched, e.g. "ember.segment_reduce"
    root: Operation
    owned: list[Operation]          # top-level ops the cluster replaces (root included)
    inputs: list[Value]             # custom-call operands, in the kernel's order
    input_roles: list[str]          # table, indices, segment_ids, weights ...
    attrs: dict[str, Any]           # combiner, index_mode, wrap_negative, weighted, init ...
    notes: list[str] = dataclasses.field(default_factory=list)
    direction: str = "forward"      # "backward": the gradient of a lookup
    kernel_shapes: list[Any] | None = None  # operand shapes the kernel takes, if not the default
    table_value: Value | None = None  # the looked-up table when it is not inputs[0]

    @property
    def table(self) -> Value:
        return self.table_value if self.table_value is not None else self.inputs[0]


@dataclasses.dataclass
class NearMiss:
    pattern: str
    root: Operation
    reason: str
    direction: str | None = None    # "backward": a miss of a lookup's gradient or its update
