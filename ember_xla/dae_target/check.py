"""Check a lowered cluster (any level: SLC, SLCV, DLC) against XLA:CPU: run the level's
interpreter (``interp/run.py``) on random valid inputs and edge cases, and the cluster's
outlined computation on XLA:CPU (``runtime.execute``) on the same inputs; compare.

Inputs are drawn per the custom-call contract: table values of magnitude in [0.25, 4) (no
denormals: XLA:CPU flushes them, the interpreters do not), ids in [-N-3, N+3) (negative and
out-of-range ones included; 2^32 + i for s64 ids with index_bits=32), segment ids with some
dropped (-1, S+1), sorted or not, non-decreasing offsets with empty bags, weights or 0/1 masks.
Edge-case rounds use all-duplicate ids, all out-of-range ids and all-empty bags.

Results must be bit-exact where XLA's own arithmetic is the contract's (NaN positions
compared, payloads not). Two forms are not: ``sqrt_n`` (XLA:CPU's rsqrt is an approximation)
and ``padded_bag`` (rooted at an HLO ``reduce``, whose order XLA:CPU may choose, and for a
weighted bag XLA:CPU contracts the weight multiply into the reduce's add as an FMA, while the
contract and the kernels round the product first). For those the outlined computation is
compared with a tolerance (64 ulp of the largest output magnitude, per output) and the native
kernel (the custom-call itself on XLA:CPU) must agree bit for bit. ``CheckResult.bitwise``
says whether every output also matched the reference bit for bit. A call without an outlined
computation (``offsets_bag`` from ``ember_xla.embedding_bag``) is checked against the native
kernel only."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from ember_xla.call_specs import BACKWARD_ROLES, ArraySpec, ClusterSpec, cluster_spec
from ember_xla.dae_target.interp.run import run
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.runtime.inputs import draw_ids

NP = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "s32": np.int32,
      "s64": np.int64}
EDGE_CASES = ("duplicates", "out_of_range", "empty")


@dataclasses.dataclass
class CheckResult:
    cluster: str
    kind: str
    reference: str                  # "outlined" (XLA:CPU) or "kernel" (native, on XLA:CPU)
    cases: int = 0
    max_abs_diff: float = 0.0
    exact: bool = True              # bit-exact vs XLA expected (see the module docstring)
    bitwise: bool = True            # every output matched the reference bit for bit
    failures: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    mag = rng.uniform(0.25, 4.0, size=shape)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(NP[dtype])


def _ids(rng: np.random.Generator, a: ArraySpec, n: int, spec: ClusterSpec,
         case: str | None) -> np.ndarray:
    size = int(np.prod(a.shape))
    x = draw_ids(rng, size, n, case)
    if case == "out_of_range" and not spec.wrap_negative:
        x = np.where(x == -1, n + 1, x)
    if spec.index_bits == 32 and a.dtype == "s64" and size:
        hi = rng.random(size) < 0.3
        x = np.where(hi, x + (1 << 32), x)
    return x.reshape(a.shape).astype(NP[a.dtype])


def random_inputs(spec: ClusterSpec, rng: np.random.Generator,
                  case: str | None = None) -> list[np.ndarray]:
    """One set of valid inputs for the call (``case``: None or one of ``EDGE_CASES``)."""
    if spec.kind in BACKWARD_ROLES:
        return _backward_inputs(spec, rng, case)
    out: list[np.ndarray] = [None] * len(spec.operands)  # type: ignore[list-item]
    for part in spec.parts:
        i0 = part.first_operand
        n = part.table.shape[0]
        out[i0] = _values(rng, part.table.shape, part.table.dtype)
        out[i0 + 1] = _ids(rng, part.lookups, n, spec, case)
        lk = int(np.prod(part.lookups.shape))
        rows = part.out.shape[0]
        if spec.kind == "offsets_bag":
            if case == "empty" or lk == 0:
                cut = np.full(rows + 1, rng.integers(0, lk + 1))
            else:
                cut = np.sort(rng.integers(0, lk + 1, size=rows + 1))
            out[i0 + 2] = cut.astype(NP[part.layout.dtype])
        elif part.layout is not None:
            seg = np.sort(rng.integers(0, max(rows, 1), size=lk))
            if case == "empty":
                seg = np.full(lk, rows + 3)
            elif rng.random() < 0.5:
                seg = rng.permutation(seg)
                seg[rng.random(lk) < 0.15] = rng.choice([-1, rows, rows + 1])
            out[i0 + 2] = seg.reshape(part.layout.shape).astype(NP[part.layout.dtype])
    if spec.weighted:
        w = spec.parts[0].weights
        vals = _values(rng, w.shape, w.dtype)
        if rng.random() < 0.3:  # a 0/1 padding mask
            vals = (rng.random(w.shape) < 0.7).astype(NP[w.dtype])
        out[-1] = vals
    return out


def _backward_inputs(spec: ClusterSpec, rng: np.random.Generator, case: str | None
                     ) -> list[np.ndarray]:
    """A lookup gradient's operands: row ids in [-V-3, V+3) (dropped outside [0, V)), all one
    id ("duplicates"), all out of range, or, for "empty", every mask false (gathered form) or
    no in-range id; gradient rows, source rows (clamped by the gather, out of range too), a
    mask, the table (with -0.0 entries, which XLA's dense update turns into +0.0) and a
    negative, zero (-0.0: zero learning rate, with all-duplicate ids), infinite (all ids out
    of range) or positive ("empty") scale: the last two take XLA's dense update of every
    untouched row."""
    v = spec.outputs[0].shape[0]
    out = []
    for role, a in zip(spec.roles, spec.operands, strict=True):
        if role == "indices":
            ids = draw_ids(rng, a.shape[0], v, "out_of_range" if case == "empty" else case)
            out.append(ids.astype(NP[a.dtype]))
        elif role == "source_rows":
            out.append(draw_ids(rng, a.shape[0], spec.operands[1].shape[0]).astype(NP[a.dtype]))
        elif role == "mask":
            keep = rng.random(a.shape) < (0.0 if case == "empty" else 0.7)
            out.append(keep)
        elif role == "scale":  # -lr: zero lr (-0.0) and a positive scale (XLA's dense rule)
            fixed = {"duplicates": -0.0, "out_of_range": np.inf, "empty": 0.25}
            x = fixed[case] if case in fixed else rng.choice([-0.1, -0.0, 0.25])
            out.append(np.asarray(x, np.float32))
        elif role == "eps":  # Adagrad's: 1e-8, 0 (0 / 0 on a zero accumulator), < 0 (dense)
            x = rng.choice([1e-8, 1e-8, 0.0, -1.0]) if case is None else 1e-8
            out.append(np.asarray(x, np.float32))
        elif role == "accumulator":  # >= 0, with 0, -0 (XLA's dense update makes it +0),
            # NaN and Inf entries
            acc = rng.uniform(0.0, 2.0, a.shape).astype(np.float32)
            edge = rng.random(a.shape) < 0.1
            edges = [0.0, -0.0, np.nan, np.inf]
            acc[edge] = rng.choice(np.array(edges, np.float32), int(edge.sum()))
            out.append(acc)
        elif role in ("table", "operand"):  # -0.0 entries: XLA's dense update makes them +0.0
            t = _values(rng, a.shape, a.dtype)
            out.append(np.where(rng.random(a.shape) < 0.1, -0.0, t).astype(t.dtype))
        else:  # updates, source
            out.append(_values(rng, a.shape, a.dtype))
    return out


def outlined_module(module: Module, call: Operation) -> Module:
    """The call's outlined computation as a module of its own (runs on XLA:CPU)."""
    m = module.clone()
    g = m.graph(call.callees[0].name)
    m.entry = g
    m.remove_unreachable_graphs()
    for key in ("input_output_alias", "buffer_donor"):  # the whole module's entry's
        m.attributes.pop(key, None)
    return m


def kernel_reference(spec: ClusterSpec) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    """The native kernel of the call on XLA:CPU (through ``jax.ffi.ffi_call``)."""
    import jax

    from ember_xla.custom_calls import target_of_kind
    from ember_xla.native import register_targets

    register_targets()
    outs = [jax.ShapeDtypeStruct(o.shape, NP[o.dtype]) for o in spec.outputs]
    call = jax.ffi.ffi_call(target_of_kind(spec.kind).name,
                            outs if len(outs) > 1 else outs[0])
    attrs = {} if spec.kind in BACKWARD_ROLES else dict(spec.attrs)
    if spec.kind == "sparse_rowwise_adagrad":
        attrs = {"lr_folded": spec.lr_folded, "sum_order": spec.sum_order}
    elif spec.kind == "ordered_scatter":
        attrs = {"combiner": spec.combiner}

    def run_kernel(inputs: list[np.ndarray]) -> list[np.ndarray]:
        with jax.enable_x64(True):
            res = jax.jit(lambda *a: call(*a, **attrs))(*inputs)
        return [np.asarray(r) for r in (res if isinstance(res, list | tuple) else [res])]

    return run_kernel


def exact_vs_xla(spec: ClusterSpec) -> bool:
    """Does XLA:CPU compute the outlined computation with the contract's roundings?"""
    return spec.combiner != "sqrt_n" and spec.kind != "padded_bag"


def compare(want: np.ndarray, got: np.ndarray, exact: bool) -> tuple[float, str | None]:
    """(max |difference| outside matching NaNs, a failure message or None)."""
    if want.shape != got.shape or want.dtype != got.dtype:
        return float("inf"), f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    x, y = want.astype(np.float64), got.astype(np.float64)
    nx, ny = np.isnan(x), np.isnan(y)
    if (nx != ny).any():
        return float("inf"), f"NaN at different positions ({int((nx != ny).sum())})"
    with np.errstate(invalid="ignore"):
        diff = np.where(nx | (x == y), 0.0, np.abs(x - y))
    diff = np.where(np.isnan(diff), np.inf, diff)  # inf vs -inf
    md = float(diff.max()) if diff.size else 0.0
    if exact:
        same = (x == y) | nx
        if not same.all() or (np.signbit(x) != np.signbit(y))[~nx].any():
            return md, f"not bit-exact: max |diff| {md:g}"
        return md, None
    eps = float(ml_dtypes.finfo(want.dtype).eps)  # np.finfo rejects bfloat16
    scale = float(np.abs(np.where(nx | np.isinf(x), 0.0, x)).max()) if x.size else 0.0
    if md > 64 * eps * (1.0 + scale) or (np.isinf(x) != np.isinf(y)).any():
        return md, f"beyond the tolerance: max |diff| {md:g}"
    return md, None


Runner = Callable[[Module, list[np.ndarray]], list[np.ndarray]]


def check_lowered(module: Module, call: Operation, lowered: Module, rounds: int = 3,
                  seed: int = 0, runner: Runner = run) -> CheckResult:
    """Run ``lowered`` (any level, through ``runner``: by default ``interp.run.run``) vs the
    call's outlined computation on XLA:CPU on ``rounds`` random input sets plus one per edge
    case; the result lists the failures and the max difference."""
    from ember_xla.runtime.execute import run_module

    spec = cluster_spec(call)
    if not call.callees:
        return check_spec(spec, lowered, rounds, seed, runner)
    exact = exact_vs_xla(spec)
    ref_module = outlined_module(module, call)

    def reference(xs: list[np.ndarray]) -> list[np.ndarray]:
        return run_module(ref_module, xs)

    res = CheckResult(spec.name, spec.kind, "outlined", exact=exact)
    kernel = None if exact else kernel_reference(spec)
    return _run_cases(spec, lowered, reference, kernel, res, rounds, seed, runner)


def check_spec(spec: ClusterSpec, lowered: Module, rounds: int = 3, seed: int = 0,
               runner: Runner = run) -> CheckResult:
    """Like ``check_lowered`` for a spec without an HLO module: the reference is the native
    kernel of the spec's target on XLA:CPU (bit-exact expected)."""
    res = CheckResult(spec.name, spec.kind, "kernel", exact=True)
    return _run_cases(spec, lowered, kernel_reference(spec), None, res, rounds, seed, runner)


def _run_cases(spec: ClusterSpec, lowered: Module, reference: Runner | Callable[..., Any],
               kernel: Callable[..., Any] | None, res: CheckResult, rounds: int, seed: int,
               runner: Runner) -> CheckResult:
    rng = np.random.default_rng(seed)
    for case in [None] * rounds + list(EDGE_CASES):
        inputs = random_inputs(spec, rng, case)
        want = reference(inputs)
        got = runner(lowered, inputs)
        res.cases += 1
        for k, (w, g) in enumerate(zip(want, got, strict=True)):
            md, fail = compare(np.asarray(w), g, res.exact)
            res.max_abs_diff = max(res.max_abs_diff, md)
            res.bitwise &= compare(np.asarray(w), g, True)[1] is None
            if fail:
                res.failures.append(f"{case or 'random'} output {k}: {fail}")
        if kernel is not None:  # not bit-exact vs XLA: the kernel's contract must hold
            for k, (w, g) in enumerate(zip(kernel(inputs), got, strict=True)):
                _, fail = compare(np.asarray(w), g, True)
                if fail:
                    res.failures.append(f"{case or 'random'} output {k} vs kernel: {fail}")
    return res


def shrink(spec: ClusterSpec, rows: int = 4, lookups: int = 12, width: int = 8,
           table_rows: int = 16) -> ClusterSpec:
    """The same cluster form (kind, attributes, dtypes, ranks) at a size an interpreter runs
    in well under a second: at most ``rows`` output rows, ``lookups`` lookups, ``width``
    columns and ``table_rows`` table rows per table (zero sizes stay zero). For a ``--verify``
    of clusters too large to interpret: lower the shrunk spec the same way, ``check_spec`` it."""
    if spec.kind in BACKWARD_ROLES:
        return _shrink_backward(spec, rows, lookups, width, table_rows)
    ops = list(spec.operands)
    parts = []
    w_new = None
    for p in spec.parts:
        n = min(p.table.shape[0], table_rows)
        d = min(p.table.shape[1], width)
        r = min(p.out.shape[0], rows)
        table = ArraySpec((n, d), p.table.dtype)
        out = ArraySpec((r, d), p.out.dtype)
        if spec.kind == "padded_bag":
            bag = min(p.lookups.shape[1], max(1, lookups // max(r, 1)))
            lk = ArraySpec((r, bag) + p.lookups.shape[2:], p.lookups.dtype)
            layout = None
            if p.weights is not None:
                w_new = ArraySpec(lk.shape if p.weights.shape == p.lookups.shape
                                  else (r * bag,) + p.weights.shape[1:], p.weights.dtype)
        else:
            n_lk = min(p.lookups.shape[0], lookups)
            lk = ArraySpec((n_lk,) + p.lookups.shape[1:], p.lookups.dtype)
            assert p.layout is not None
            layout = ArraySpec((r + 1,) if spec.kind == "offsets_bag"
                               else (n_lk,) + p.layout.shape[1:], p.layout.dtype)
            if p.weights is not None:
                w_new = ArraySpec((n_lk,) + p.weights.shape[1:], p.weights.dtype)
        ops[p.first_operand:p.first_operand + 2] = [table, lk]
        if layout is not None:
            ops[p.first_operand + 2] = layout
        parts.append(dataclasses.replace(p, table=table, lookups=lk, layout=layout,
                                         weights=w_new, out=out))
    if w_new is not None:
        ops[-1] = w_new
    return dataclasses.replace(spec, operands=tuple(ops), outputs=tuple(p.out for p in parts),
                               parts=tuple(parts))


def _shrink_backward(spec: ClusterSpec, rows: int, lookups: int, width: int,
                     table_rows: int) -> ClusterSpec:
    """``shrink`` of a gradient / fused update: at most ``table_rows`` rows written,
    ``lookups`` updates, ``width`` columns and ``rows`` source rows (gathered form)."""
    out = spec.outputs[0]
    v, d = min(out.shape[0], table_rows), min(out.shape[1], width)
    n = min(spec.operands[spec.roles.index("indices")].shape[0], lookups)
    shapes = {"table": (v, d), "indices": (n,), "updates": (n, d), "source_rows": (n,),
              "mask": (n,), "scale": ()}
    if "source" in spec.roles:
        shapes["source"] = (min(spec.operands[spec.roles.index("source")].shape[0], rows), d)
    ops = tuple(ArraySpec(shapes[r], a.dtype) for r, a in zip(spec.roles, spec.operands,
                                                                 strict=True))
    new_out = ArraySpec((v, d), out.dtype)
    p = spec.parts[0]
    part = dataclasses.replace(p, table=ops[p.first_operand], out=new_out,
                               lookups=ops[spec.roles.index("indices")],
                               layout=ops[spec.roles.index("source_rows")]
                               if p.layout is not None else None)
    return dataclasses.replace(spec, operands=ops, outputs=(new_out,), parts=(part,))


def summary(r: CheckResult) -> dict[str, Any]:
    return {"cluster": r.cluster, "kind": r.kind, "reference": r.reference, "cases": r.cases,
            "max_abs_diff": r.max_abs_diff, "exact": r.exact, "bitwise": r.bitwise, "ok": r.ok,
            "failures": r.failures}
