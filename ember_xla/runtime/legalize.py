"""Make XLA's *optimized* HLO compilable again through the HLO -> StableHLO importer.

Optimized modules carry post-layout-assignment forms the importer rejects: ``fusion``s (their
``kCustom`` backend configs are lost on import), ``bitcast``s (which reinterpret memory under
the shapes' layouts) and non-default layouts. Three passes, each exact:

* ``inline-fusions``: replace each fusion by its body (XLA fuses again when compiling);
* ``lower-bitcasts``: a bitcast = transpose to the source's physical order, reshape, transpose
  from the target's physical order (just a reshape when both layouts are row-major);
* ``default-layouts``: with no bitcasts left, layouts carry no meaning: make them row-major
  (constants are re-encoded so their values stay the same), except a custom-call's with
  operand layout constraints: those are the layouts its target reads and writes (LAPACK's
  column-major matrices), which the importer passes on to it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ember_xla.hlo.inline import inline_call
from ember_xla.hlo.literal import literal_from_numpy, literal_to_numpy
from ember_xla.hlo.shape import Shape, shape_from_dict
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import ModulePass, register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern, apply_patterns_greedily


class LegalizeError(ValueError):
    pass


@register_pass
@dataclasses.dataclass(frozen=True)
class InlineFusions(ModulePass):
    name = "inline-fusions"

    def apply(self, module: Module) -> None:
        apply_patterns_greedily(module, [_InlineFusion()], max_iterations=1 << 30)
        module.remove_unreachable_graphs()


class _InlineFusion(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.opcode == "fusion":
            inline_call(op, rewriter)


def _physical_perm(s: Shape) -> list[int]:
    """Logical dims in physical (major-to-minor) order."""
    if s.layout is None or len(s.layout) != s.rank:
        return list(range(s.rank))
    return list(reversed(s.layout))


class _LowerBitcast(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.opcode == "bitcast":
            _lower_bitcast(op, rewriter)


def _lower_bitcast(op: Operation, rw: PatternRewriter) -> None:
    g = op.parent
    src, dst = op.operands[0].type, op.result.type
    if (src.element_type != dst.element_type and src.dims == dst.dims
            and src.dtype.itemsize == dst.dtype.itemsize):
        # same bits, new type: exactly a bitcast-convert
        new = Operation("bitcast-convert", list(op.operands), [dst], dict(op.attributes),
                        name=op.name)
        new.id = op.id
        rw.insert_before(op, new)
        rw.replace_op(op, new.result)
        return
    if src.element_type != dst.element_type or src.size != dst.size:
        raise LegalizeError(f"computation {g.name}, instruction {op.name}: bitcast {src} -> "
                            f"{dst} changes the element type; not supported")
    v = op.operands[0]
    sp, dp = _physical_perm(src), _physical_perm(dst)
    if sp != list(range(src.rank)):
        t = Shape.array(src.element_type, [src.dims[d] for d in sp])
        v = rw.insert_before(op, Operation("transpose", [v], [t], {"dimensions": sp},
                                           name=op.name + ".t")).result
    phys = Shape.array(dst.element_type, [dst.dims[d] for d in dp])
    v = rw.insert_before(op, Operation("reshape", [v], [phys], name=op.name + ".r")).result
    if dp != list(range(dst.rank)):
        inv = [dp.index(i) for i in range(dst.rank)]
        v = rw.insert_before(op, Operation("transpose", [v], [Shape.array(
            dst.element_type, dst.dims)], {"dimensions": inv}, name=op.name + ".t")).result
    rw.replace_op(op, v)


@register_pass
@dataclasses.dataclass(frozen=True)
class LowerBitcasts(ModulePass):
    name = "lower-bitcasts"

    def apply(self, module: Module) -> None:
        apply_patterns_greedily(module, [_LowerBitcast()])


def _default(s: Shape) -> Shape:
    if s.is_tuple:
        return Shape.tuple_of(tuple(_default(t) for t in s.tuple_shapes))
    if not s.is_array:
        return s
    return Shape(s.element_type, s.dims, tuple(range(s.rank - 1, -1, -1)), (), s.dynamic)


@register_pass
@dataclasses.dataclass(frozen=True)
class DefaultLayouts(ModulePass):
    name = "default-layouts"

    def apply(self, module: Module) -> None:
        for g in module.graphs:
            for op in g.ops:
                if op.opcode == "bitcast":
                    raise LegalizeError(f"{op.name}: run lower-bitcasts first")
                if op.opcode == "constant" and "literal" in op.attributes:
                    lit = op.attributes["literal"]
                    shape = shape_from_dict(lit.get("shape", {}))
                    if not shape.is_tuple and not shape.has_default_layout():
                        arr = np.asarray(literal_to_numpy(lit))
                        op.attributes["literal"] = literal_from_numpy(arr, _default(shape))
                if op.opcode == "custom-call" and "operand_shapes_with_layout" in op.attributes:
                    continue  # the layouts the target reads and writes (LAPACK: column-major)
                op.result.type = _default(op.result.type)


EXECUTION_PIPELINE = "inline-fusions,lower-bitcasts,default-layouts"


def needs_legalization(module: Module) -> bool:
    """True if XLA's importer would reject or misread ``module`` as it is (plain kLoop/kInput
    fusions compile as they are and are then left alone)."""
    return any(op.opcode == "bitcast" or not op.result.type.has_default_layout()
               or (op.opcode == "fusion" and op.attributes.get("fusion_kind") == "kCustom")
               for op in module.walk())
