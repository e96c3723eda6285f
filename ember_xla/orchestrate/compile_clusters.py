"""One ember cluster -> a DAE program bound to a target: read the custom-call
(``lower.cluster.cluster_spec``), lower it through an optimization level
(``passes.levels.lower_cluster``), emit the DAE program of the final DLC module
(``dae_target.program.emit_program``) and bind it to the target's resources
(``bind_program``). A cluster the lowering refuses is returned as refused with the reason; a
program that does not fit the target raises ``DoesNotFit`` naming the cluster and why."""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.machines.config import Target


class DoesNotFit(ValueError):
    """A cluster's program does not fit the target (one line: which cluster, why)."""


@dataclasses.dataclass
class CompiledCluster:
    index: int
    call: Operation
    kind: str                        # the custom-call target, e.g. ember.offsets_bag
    spec: Any = None                 # ClusterSpec (None when refused before reading it)
    dlc: Module | None = None
    program: Any = None              # the DAE program (dae_target.program.DaeProgram)
    binding: Any = None              # its resources on the target (bind_program)
    refused: str | None = None       # why the lowering refused it

    @property
    def name(self) -> str:
        return self.call.name


def compile_program(dlc: Module, target: Target,
                    input_shapes: list[tuple[int, ...]] | None = None,
                    output_shapes: list[tuple[int, ...]] | None = None) -> tuple[Any, Any]:
    """(program, binding) of a DLC module: emitted (specialised to ``input_shapes`` /
    ``output_shapes`` when given) and bound to ``target`` (the binder's
    ``ProgramDoesNotFit`` propagates)."""
    from ember_xla.dae import bind_program
    from ember_xla.dae_target.program import emit_program

    program = emit_program(dlc, input_shapes, output_shapes)
    return program, bind_program(program, target)


def compile_cluster(index: int, call: Operation, target: Target, level: int | str
                    ) -> CompiledCluster:
    from ember_xla.call_specs import LoweringRefused, cluster_spec
    from ember_xla.dae_target.passes.levels import lower_cluster

    kind = str(call.attributes["custom_call_target"])
    out = CompiledCluster(index, call, kind)
    try:
        out.spec = cluster_spec(call)
        out.dlc = lower_cluster(out.spec, level)[-1][1]
    except LoweringRefused as e:
        out.refused = str(e)
        return out
    try:
        out.program, out.binding = compile_program(
            out.dlc, target, [a.shape for a in out.spec.operands])
    except (ValueError, LookupError) as e:
        msg = " ".join(str(e).split())
        raise DoesNotFit(f"cluster {index} (%{call.name}, {kind}): its DAE program does not "
                         f"fit target {target.name} ({target.source}): {msg}") from None
    return out


def compile_clusters(module: Module, target: Target, level: int | str) -> list[CompiledCluster]:
    """Every ember call of a rewritten module, in graph order."""
    from ember_xla.call_specs import ember_calls

    return [compile_cluster(k, c, target, level) for k, c in enumerate(ember_calls(module))]
