"""The ``slcv`` dialect: vectorized SLC (Ember's ``slcvec``). Access-side vector streams over
``VL`` lanes with a tail mask, row buffers in the queue, and the few core-side helpers that
vectorized and bufferized callbacks need. Semantics: ``interp/slcv.py``.

Ops (operands -> results), ``S<T>`` meaning ``!slc.stream<T>``:
- ``slcv.for(lb, ub, step, init...) {vl, config}`` region
  ``^bb0(%iv: S<vector<VLxindex>>, %mask: S<vector<VLxi1>>, %carried...)`` ending in
  ``slcv.yield(carried...)``. Iteration ``t`` covers lanes ``lb + (t*VL + l)*step``;
  the mask is false for lanes at or past ``ub`` (the tail). ``config``: ``vector`` (every
  stream of the body is indexed by the vector induction variable), ``bcast`` (streams of
  enclosing loops are broadcast to the lanes) or ``scalar``.
- ``slcv.mem_stream(m, idx..., mask) {contiguous?}`` -> ``S<vector<VLxT>>``: one index per
  dimension of ``m`` (scalar streams are broadcast, vector streams give one index per lane);
  masked-off lanes are not loaded (they read 0). ``contiguous = true`` (set by simplify-mem):
  the last index is sequential, so the lanes are one contiguous vector load.
- ``slcv.alu_stream(a[, b]) {op}`` -> ``S<vector<VLxT>>``: ``slc.alu_stream``'s ops lane-wise,
  at least one operand a vector stream (scalar operands are broadcast).
- ``slcv.buf_stream(size)`` -> ``S<memref<?xT>>``: a row buffer of ``size`` elements in the
  queue, fresh each time the op runs. ``slcv.to_buffer(vals, buf, iv, mask)``: the access
  side writes the active lanes of ``vals`` at positions ``iv``.
- Core side (inside callbacks): ``slcv.from_buffer(buf, i)`` -> ``vector<VLxT>`` (elements
  ``i .. i+VL-1``, 0 past the end); ``slcv.mask(i, lb, ub, step)`` -> ``vector<VLxi1>`` (lane l
  active iff ``lb <= i + l*step < ub``); ``slcv.first_lane(v)`` -> lane 0 of an index vector.
- Dedup: ``slcv.unique(ids)`` -> ``(memref<?xT> uniq, memref<..xindex> inv, S<index> count)``
  (access side: sort and unique all of ``ids``, any rank; ``uniq[inv[j...]] == ids[j...]``,
  ``inv`` has the shape of ``ids``). The core keeps
  the fetched unique rows in a ``memref.alloc`` scratch buffer (re-expansion).
"""

from __future__ import annotations

from typing import Any

from ember_xla.dae_target.dialects.common import LoopOpDef
from ember_xla.dae_target.dialects.slc import ALU_OPS, ALU_UNARY, StreamType
from ember_xla.ir.dialect import Dialect, register_dialect
from ember_xla.ir.opdef import OpDef, attribute, operand, operands
from ember_xla.ir.traits import IsTerminator, Pure, SingleBlock, has_parent
from ember_xla.ir.types import (
    I1,
    INDEX,
    IndexType,
    IntegerType,
    MemRefType,
    Type,
    VectorType,
)

slcv = register_dialect(Dialect("slcv"))

LOOP_CONFIGS = ("vector", "bcast", "scalar")


def stream(t: Type) -> StreamType:
    """``!slc.stream<t>``."""
    return StreamType.of(t)


def stream_elem(t: Any) -> Type | None:
    """``T`` of ``!slc.stream<T>``; ``None`` for any other type."""
    return t.elem if isinstance(t, StreamType) else None


def vec(vl: int, elem: Type) -> VectorType:
    return VectorType((vl,), elem)


def _is_index(t: Any) -> bool:
    return isinstance(t, IndexType | IntegerType) and t != I1


def _vl_of(t: Any) -> int | None:
    return t.shape[0] if isinstance(t, VectorType) and len(t.shape) == 1 else None


@slcv.add_op
class ForOp(LoopOpDef):
    """``slcv.for<VL>``: the vectorized loop (see the module docstring)."""

    opcode = "slcv.for"
    traits = frozenset({SingleBlock})

    def verify_(self) -> None:
        self.expect_counts(regions=1)
        if len(self.operands) < 3:
            raise self.fail("expects lb, ub, step (and init values)")
        vl = self.attr("vl", int)
        if vl < 1:
            raise self.fail(f"vl must be positive, not {vl}")
        if self.attr("config", str) not in LOOP_CONFIGS:
            raise self.fail(f"config must be one of {', '.join(LOOP_CONFIGS)}")
        for v in self.operands[:3]:
            if stream_elem(v.type) != INDEX:
                raise self.fail(f"bounds and step must be !slc.stream<index>, not {v.type}")
        args = self.body.args
        want = [stream(vec(vl, INDEX)), stream(vec(vl, I1))] + [v.type for v in self.init]
        if [a.type for a in args] != want:
            raise self.fail("body takes (iv: !slc.stream<vector<VLxindex>>, "
                            "mask: !slc.stream<vector<VLxi1>>, carried values...)")
        if [r.type for r in self.results] != [v.type for v in self.init]:
            raise self.fail("results must match the init values")
        if not isinstance(self.body.terminator, YieldOp):
            raise self.fail("body must end in slcv.yield")

    vl = attribute("vl")

    @property
    def mask(self) -> Any:
        return self.body.args[1]


@slcv.add_op
class YieldOp(OpDef):
    """``slcv.yield(carried...)``: ends an ``slcv.for`` body."""

    opcode = "slcv.yield"
    traits = frozenset({IsTerminator, has_parent("slcv.for")})


@slcv.add_op
class MemStreamOp(OpDef):
    """``slcv.mem_stream(m, idx..., mask) {contiguous?}`` -> ``!slc.stream<vector<VLxT>>``."""

    opcode = "slcv.mem_stream"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(results=1, regions=0)
        if not self.operands or not isinstance(self.operands[0].type, MemRefType):
            raise self.fail("first operand must be a memref")
        m = self.operands[0].type
        if len(self.operands) != m.rank + 2:
            raise self.fail(f"expects {m.rank} indices and a mask for {m}")
        out = stream_elem(self.result.type)
        vl = _vl_of(out)
        if vl is None or out.elem != m.elem:
            raise self.fail(f"result must be !slc.stream<vector<VLx{m.elem}>>")
        if stream_elem(self.mask.type) != vec(vl, I1):
            raise self.fail(f"mask must be !slc.stream<vector<{vl}xi1>>")
        for v in self.indices:
            e = stream_elem(v.type)
            if not (_is_index(e) or (_vl_of(e) == vl and _is_index(e.elem))):
                raise self.fail(f"index {v.type} is not an index stream (scalar or {vl} lanes)")
        if self.attributes.get("contiguous", False):
            if not isinstance(stream_elem(self.indices[-1].type), VectorType) or any(
                    isinstance(stream_elem(v.type), VectorType) for v in self.indices[:-1]):
                raise self.fail("a contiguous load takes a vector last index only")

    memref = operand(0)
    indices = operands(1, -1)
    mask = operand(-1)

    @property
    def contiguous(self) -> bool:
        return bool(self.attributes.get("contiguous", False))


@slcv.add_op
class AluStreamOp(OpDef):
    """``slcv.alu_stream(a[, b]) {op}`` -> ``!slc.stream<vector<VLxT>>`` (lane-wise)."""

    opcode = "slcv.alu_stream"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(results=1, regions=0)
        op = self.attr("op", str)
        if op not in ALU_OPS:
            raise self.fail(f"unknown alu op {op!r}")
        if len(self.operands) != (1 if op in ALU_UNARY else 2):
            raise self.fail(f"{op} takes {1 if op in ALU_UNARY else 2} operands")
        out = stream_elem(self.result.type)
        vl = _vl_of(out)
        if vl is None or not isinstance(out.elem, IndexType | IntegerType):
            raise self.fail("result must be a stream of an integer vector")
        lanes = [_vl_of(stream_elem(v.type)) for v in self.operands]
        if vl not in lanes or any(n not in (None, vl) for n in lanes):
            raise self.fail(f"operands: integer streams, scalar or {vl} lanes, one a vector")
        for v in self.operands:
            e = stream_elem(v.type)
            if e is None or not isinstance(getattr(e, "elem", e), IndexType | IntegerType):
                raise self.fail(f"operand {v.type} is not an integer stream")


@slcv.add_op
class BufStreamOp(OpDef):
    """``slcv.buf_stream(size)`` -> ``!slc.stream<memref<?xT>>`` (a queue row buffer)."""

    opcode = "slcv.buf_stream"

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        if stream_elem(self.operands[0].type) != INDEX:
            raise self.fail("size must be !slc.stream<index>")
        b = stream_elem(self.result.type)
        if not (isinstance(b, MemRefType) and b.shape == (None,)):
            raise self.fail("result must be !slc.stream<memref<?xT>>")


@slcv.add_op
class ToBufferOp(OpDef):
    """``slcv.to_buffer(vals, buf, iv, mask)``: write the active lanes at positions ``iv``."""

    opcode = "slcv.to_buffer"

    def verify_(self) -> None:
        self.expect_counts(operands=4, results=0, regions=0)
        vals, buf, iv, mask = (stream_elem(v.type) for v in self.operands)
        vl = _vl_of(vals)
        if vl is None or not isinstance(buf, MemRefType) or buf.elem != vals.elem:
            raise self.fail("expects a vector stream and a row buffer of its element type")
        if iv != vec(vl, INDEX) or mask != vec(vl, I1):
            raise self.fail(f"iv and mask must be {vl}-lane index and i1 streams")


@slcv.add_op
class FromBufferOp(OpDef):
    """``slcv.from_buffer(buf, i)`` -> ``vector<VLxT>`` (core side)."""

    opcode = "slcv.from_buffer"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(operands=2, results=1, regions=0)
        b, i = (v.type for v in self.operands)
        r = self.result.type
        if not (isinstance(b, MemRefType) and b.rank == 1 and _vl_of(r) and r.elem == b.elem):
            raise self.fail("expects a memref<?xT> and gives vector<VLxT>")
        if not _is_index(i):
            raise self.fail(f"position must be an index, not {i}")


@slcv.add_op
class MaskOp(OpDef):
    """``slcv.mask(i, lb, ub, step)`` -> ``vector<VLxi1>`` (core-side tail mask)."""

    opcode = "slcv.mask"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(operands=4, results=1, regions=0)
        if not all(_is_index(v.type) for v in self.operands):
            raise self.fail("operands must be indices")
        r = self.result.type
        if not (_vl_of(r) and r.elem == I1):
            raise self.fail("result must be vector<VLxi1>")


@slcv.add_op
class FirstLaneOp(OpDef):
    """``slcv.first_lane(v)`` -> lane 0 of an index vector (a vector loop's base index)."""

    opcode = "slcv.first_lane"
    traits = frozenset({Pure})

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=1, regions=0)
        t = self.operands[0].type
        if not (_vl_of(t) and t.elem == self.result.type and _is_index(t.elem)):
            raise self.fail("expects vector<VLxindex> -> index")


@slcv.add_op
class UniqueOp(OpDef):
    """``slcv.unique(ids)`` -> ``(uniq, inv, count)`` (access-side sort + unique)."""

    opcode = "slcv.unique"

    def verify_(self) -> None:
        self.expect_counts(operands=1, results=3, regions=0)
        ids = self.operands[0].type
        if not (isinstance(ids, MemRefType) and _is_index(ids.elem)):
            raise self.fail("ids must be a memref of integers")
        u, inv, count = (r.type for r in self.results)
        if u != MemRefType((None,), ids.elem) or inv != MemRefType((None,) * ids.rank, INDEX):
            raise self.fail(f"results must be memref<?x{ids.elem}>, an index memref of the "
                            "ids' rank and !slc.stream<index>")
        if stream_elem(count) != INDEX:
            raise self.fail("count must be !slc.stream<index>")
