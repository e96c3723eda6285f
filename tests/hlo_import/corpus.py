"""Corpus of real XLA HLO modules produced live by JAX and TensorFlow.

Every case is built lazily (and memoised) by :func:`build`, which returns

    (HloModuleProto bytes, HLO text as XLA prints it, example inputs)

The example inputs are deterministic numpy arrays in ENTRY-parameter order. None of the
corpus modules has a tuple-shaped entry parameter (JAX flattens pytrees, TF flattens
nests), so every input is one array; TF variables captured by a function are extra entry
parameters after the user inputs, and their actual values are included.

:func:`expected` returns the outputs computed by the framework itself (``jax.jit`` or the
TF function), flattened, for checking that an imported/re-exported module still computes
the same thing.

Importing this module does not import TensorFlow (the TF builders import it lazily), and
does not import JAX either until a case is built.

Kinds of modules:

* ``source="jax"``, ``optimized=False``: ``jax.jit(f).lower(*a).compiler_ir('hlo')``;
  proto ``as_serialized_hlo_module_proto()``, text ``as_hlo_text(print_large_constants=True)``
  (the default prints large constants as ``{...}``, which XLA parses back as garbage).
* ``source="jax"``, ``optimized=True``: ``jax.jit(f).lower(*a).compile()``; text
  ``compiled.as_text()`` but with large constants printed in full, proto
  ``compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()``.
* ``source="tf"``: ``tf.function(jit_compile=True)``'s ``experimental_get_compiler_ir``,
  stages ``hlo_serialized``/``hlo`` (or ``optimized_hlo_serialized``/``optimized_hlo``).
* ``source="savedmodel"``: a ``tf.Module`` saved to a temp dir and loaded back.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CorpusCase:
    name: str
    source: str  # "jax" | "tf" | "savedmodel"
    optimized: bool
    features: tuple[str, ...] = ()


_BUILDERS: dict[str, object] = {}
CASES: list[CorpusCase] = []


def _case(name: str, source: str, optimized: bool = False, features: tuple[str, ...] = ()):
    def deco(fn):
        if name in _BUILDERS:
            raise ValueError(f"duplicate corpus case {name}")
        _BUILDERS[name] = fn
        CASES.append(CorpusCase(name, source, optimized, tuple(features)))
        return fn

    return deco


@functools.cache
def _build_cached(case_name: str):
    if case_name not in _BUILDERS:
        raise KeyError(f"unknown corpus case {case_name!r}")
    proto, text, inputs, expected = _BUILDERS[case_name]()
    assert isinstance(proto, bytes) and isinstance(text, str)
    inputs = tuple(np.asarray(a) for a in inputs)
    expected = tuple(np.asarray(a) for a in expected)
    for a in inputs + expected:
        a.setflags(write=False)
    return proto, text, inputs, expected


def build(case_name: str) -> tuple[bytes, str, list[np.ndarray]]:
    """(HloModuleProto bytes, HLO text, example inputs in entry-parameter order)."""
    proto, text, inputs, _ = _build_cached(case_name)
    return proto, text, list(inputs)


def expected(case_name: str) -> list[np.ndarray]:
    """Outputs of the framework function on the example inputs, flattened."""
    return list(_build_cached(case_name)[3])


def case(case_name: str) -> CorpusCase:
    for c in CASES:
        if c.name == case_name:
            return c
    raise KeyError(case_name)


def write_texts(directory: str = "/tmp/corpus_texts") -> None:
    """Write every case's HLO text to <directory>/<name>.hlo."""
    os.makedirs(directory, exist_ok=True)
    for c in CASES:
        with open(os.path.join(directory, c.name + ".hlo"), "w") as f:
            f.write(build(c.name)[1])


# ----------------------------------------------------------------------------- helpers


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f(rng, shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _pos(rng, shape, dtype=np.float32):
    return rng.uniform(0.5, 2.0, shape).astype(dtype)


def _i(rng, shape, lo, hi, dtype=np.int32):
    return rng.integers(lo, hi, shape).astype(dtype)


def _x64_ctx():
    """64-bit mode for lowering (jax>=0.9 spells it jax.enable_x64; older jax.experimental)."""
    import jax

    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64  # pragma: no cover - older jax

    return enable_x64()


def _jax(f, *args, x64: bool = False):
    import jax

    with _x64_ctx() if x64 else contextlib.nullcontext():
        comp = jax.jit(f).lower(*args).compiler_ir("hlo")
        proto, text = comp.as_serialized_hlo_module_proto(), comp.as_hlo_text(True)
        ref = jax.jit(f)(*args)
    leaves = jax.tree_util.tree_leaves(args)
    outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(ref)]
    return proto, text, leaves, outs


def _jax_opt(f, *args, x64: bool = False):
    import jax
    import jaxlib._hlo as _hlo

    with _x64_ctx() if x64 else contextlib.nullcontext():
        compiled = jax.jit(f).lower(*args).compile()
        ref = jax.jit(f)(*args)
    module = compiled.runtime_executable().hlo_modules()[0]
    proto = module.as_serialized_hlo_module_proto()
    # compiled.as_text() == module.to_string(), which elides large constants as {...};
    # print the same way but with every constant in full.
    opts = _hlo.HloPrintOptions()
    opts.print_large_constants = True
    text = module.to_string(opts)
    leaves = jax.tree_util.tree_leaves(args)
    outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(ref)]
    return proto, text, leaves, outs


def _balanced_end(s: str, start: int) -> int:
    """Index just past the parenthesis group that opens at s[start] == '('."""
    depth = 0
    for i in range(start, len(s)):
        if s[i] == "(":
            depth += 1
        elif s[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError(s)


def _unelide_constants(text: str, proto: bytes) -> str:
    """Put the full literal back into ``constant({...})`` lines of a printed module.

    TF's ``stage='hlo'`` text elides large constants; the rest of its spelling is kept as
    TF prints it, and each elided literal is taken from the proto printed in full.
    """
    if "constant({...})" not in text:
        return text
    import jaxlib._hlo as _hlo

    opts = _hlo.HloPrintOptions()
    opts.print_large_constants = True
    full = _hlo.HloModule.from_serialized_hlo_module_proto(proto).to_string(opts)
    literal = {}
    for line in full.splitlines():
        k = line.find(" constant(")
        if k < 0 or " = " not in line:
            continue
        name = line.split(" = ", 1)[0].strip().removeprefix("ROOT ").strip()
        start = k + len(" constant")
        literal[name] = line[start : _balanced_end(line, start)]
    out = []
    for line in text.splitlines(keepends=True):
        if "constant({...})" in line:
            name = line.split(" = ", 1)[0].strip().removeprefix("ROOT ").strip()
            line = line.replace("constant({...})", "constant" + literal[name], 1)
        out.append(line)
    return "".join(out)


def _tf_ir(tf_fn, args, optimized: bool = False):
    """HLO of a jit_compile tf.function; inputs are user args then captured variables."""
    import tensorflow as tf

    targs = [tf.constant(a) for a in args]
    get = tf_fn.experimental_get_compiler_ir(*targs)
    if optimized:
        proto = get(stage="optimized_hlo_serialized")
        text = get(stage="optimized_hlo")
    else:
        proto = get(stage="hlo_serialized")
        text = get(stage="hlo")
    proto = bytes(proto)
    text = _unelide_constants(text, proto)
    cf = tf_fn.get_concrete_function(*targs)
    # Captured resource handles, in capture order (== entry parameter order).
    var_by_handle = {}
    for v in cf.variables:
        var_by_handle[id(v.handle)] = v
    extra = []
    for cap in cf.captured_inputs:
        v = var_by_handle.get(id(cap))
        if v is not None:
            extra.append(v.numpy())
        elif cap.dtype != tf.resource:
            extra.append(cap.numpy())  # a captured eager tensor is a parameter too
        else:
            raise RuntimeError(f"captured resource {cap} is not a known variable")
    ref = tf_fn(*targs)
    outs = [np.asarray(o) for o in tf.nest.flatten(ref)]
    return proto, text, list(args) + extra, outs


# ------------------------------------------------------------------ JAX, unoptimized

# A constant large enough that printers elide it as {...} unless told not to.
_LARGE_CONST = (np.arange(64 * 4, dtype=np.float32).reshape(64, 4) - 100.0) / 8.0


@_case(
    "jax_elementwise_f32",
    "jax",
    features=(
        "exp",
        "log",
        "log1p",
        "expm1",
        "tanh",
        "logistic",
        "sqrt",
        "rsqrt",
        "cbrt",
        "sin",
        "cos",
        "abs",
        "neg",
        "sign",
        "floor",
        "ceil",
        "round",
        "power",
        "atan2",
        "remainder",
        "min",
        "max",
        "clamp",
        "erf",
    ),
)
def _b():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(x, y):
        p = jnp.abs(x) + 0.5
        a = jnp.exp(x) + jnp.log(p) + jnp.tanh(y) + jax.nn.sigmoid(x)
        b = jnp.sqrt(p) * lax.rsqrt(p) + jnp.log1p(p) - jnp.expm1(x * 0.1)
        c = jnp.sin(x) * jnp.cos(y) + jnp.sign(y) - jnp.floor(x) + jnp.ceil(y)
        d = lax.round(x) + jnp.power(p, 1.5) + jnp.arctan2(x, y) + jnp.remainder(x, 0.7)
        e = jnp.minimum(a, b) + jnp.maximum(c, d) + jnp.clip(x, -0.5, 0.5) + lax.cbrt(y)
        return -e + lax.erf(x)

    r = _rng(1)
    return _jax(f, _f(r, (8, 16)), _f(r, (8, 16)))


@_case(
    "jax_int_ops",
    "jax",
    features=(
        "s32",
        "u32",
        "add",
        "subtract",
        "multiply",
        "divide",
        "remainder",
        "and",
        "or",
        "xor",
        "not",
        "shift-left",
        "shift-right-arithmetic",
        "shift-right-logical",
        "popcnt",
        "clz",
        "abs",
        "sign",
        "min",
        "max",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(a, b, u):
        b = jnp.where(b == 0, 1, b)
        s = a + b * 3 - a // b + lax.rem(a, b) + lax.div(a, b)
        s = s + (a & b) + (a | 7) + (a ^ b) + ~a + jnp.abs(a) + jnp.sign(b)
        s = s + lax.shift_left(a, 2) + lax.shift_right_arithmetic(a, 1)
        s = s + lax.population_count(a) + lax.clz(b) + jnp.maximum(a, b) - jnp.minimum(a, b)
        w = lax.shift_right_logical(u, jnp.uint32(3)) * jnp.uint32(2654435761) + (u >> 5)
        w = w ^ (u // jnp.uint32(7)) + u % jnp.uint32(13)
        return s, w

    r = _rng(2)
    return _jax(
        f, _i(r, (8, 8), -1000, 1000), _i(r, (8, 8), -50, 50), _i(r, (8, 8), 0, 2**32, np.uint32)
    )


@_case(
    "jax_compare_select",
    "jax",
    features=(
        "compare EQ/NE/LT/LE/GT/GE",
        "select",
        "pred",
        "and/or/not on pred",
        "isnan (NE self)",
        "isfinite",
        "total order compare",
    ),
)
def _b():
    import jax.numpy as jnp

    def f(x, y, k):
        m = (x < y) & ~(x == 0.0) | (x >= 1.0)
        m2 = (k != 3) ^ (k > 5) | (k <= -2)
        z = jnp.where(m, x, y) + jnp.where(m2, 1.0, -1.0)
        z = jnp.where(jnp.isnan(z) | ~jnp.isfinite(y), 0.0, z)
        return z, m & m2, jnp.logical_not(m)

    r = _rng(3)
    return _jax(f, _f(r, (8, 8)), _f(r, (8, 8)), _i(r, (8, 8), -8, 8))


@_case(
    "jax_converts",
    "jax",
    features=(
        "convert f32->s32/u8/s8/bf16/f16/pred",
        "convert s32/u8/s8/pred->f32",
        "bitcast-convert f32<->u32",
        "reduce-precision?",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x, i, u8, s8, p):
        a = x.astype(jnp.int32) + i
        b = x.astype(jnp.bfloat16).astype(jnp.float32) + x.astype(jnp.float16).astype(jnp.float32)
        c = u8.astype(jnp.float32) + s8.astype(jnp.float32) + p.astype(jnp.float32)
        d = lax.bitcast_convert_type(x, jnp.uint32) >> 16
        e = lax.bitcast_convert_type(d << 16, jnp.float32)
        g = (x * 10).astype(jnp.uint8), (x * 10).astype(jnp.int8), (x > 0)
        return a, b + c + e, g, i.astype(jnp.float32)

    r = _rng(4)
    return _jax(
        f,
        _f(r, (8, 8)),
        _i(r, (8, 8), -9, 9),
        _i(r, (8, 8), 0, 256, np.uint8),
        _i(r, (8, 8), -128, 128, np.int8),
        r.integers(0, 2, (8, 8)).astype(bool),
    )


@_case("jax_dot_f32", "jax", features=("dot (matmul)", "dot vector-matrix"))
def _b():
    def f(x, w, v):
        return x @ w, v @ w

    r = _rng(5)
    return _jax(f, _f(r, (16, 32)), _f(r, (32, 8)), _f(r, (32,)))


@_case(
    "jax_dot_general_batched",
    "jax",
    features=(
        "dot with lhs_batch_dims/rhs_batch_dims",
        "multiple contracting dims",
        "einsum",
        "transpose",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(a, b, c):
        x = jnp.einsum("bij,bjk->bik", a, b)
        y = lax.dot_general(a, c, (((2, 1), (0, 1)), ((), ())))
        z = jnp.einsum("bij,bkj->bki", a, a)
        return x, y, z

    r = _rng(6)
    return _jax(f, _f(r, (4, 8, 16)), _f(r, (4, 16, 8)), _f(r, (16, 8, 5)))


@_case(
    "jax_conv2d_nhwc",
    "jax",
    features=(
        "convolution NHWC/HWIO dim_labels=b01f_01io->b01f",
        "window stride/pad",
        "rhs_dilation",
        "feature_group_count (depthwise)",
    ),
)
def _b():
    from jax import lax

    def f(x, w, dw):
        dn = ("NHWC", "HWIO", "NHWC")
        y = lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=dn)
        z = lax.conv_general_dilated(
            x, w, (1, 1), ((1, 1), (2, 2)), rhs_dilation=(2, 1), dimension_numbers=dn
        )
        d = lax.conv_general_dilated(
            x, dw, (1, 1), "VALID", dimension_numbers=dn, feature_group_count=3
        )
        return y, z, d

    r = _rng(7)
    return _jax(f, _f(r, (2, 12, 12, 3)), _f(r, (3, 3, 3, 4)), _f(r, (3, 3, 1, 6)))


@_case(
    "jax_reduce",
    "jax",
    features=(
        "reduce add/max/min/mul",
        "reduce over several axes",
        "mean (divide)",
        "logsumexp",
        "reduce pred (any/all)",
    ),
)
def _b():
    import jax
    import jax.numpy as jnp

    def f(x):
        return (
            x.sum(axis=(0, 2)),
            x.max(axis=1),
            x.min(),
            jnp.prod(x[0], axis=0),
            x.mean(axis=-1),
            jax.nn.logsumexp(x, axis=2),
            jnp.any(x > 2.0, axis=0),
            jnp.all(x > -3.0),
        )

    r = _rng(8)
    return _jax(f, _f(r, (4, 8, 16)))


@_case(
    "jax_argmax",
    "jax",
    features=(
        "variadic reduce (tuple of 2 operands)",
        "argmax",
        "argmin",
        "tuple-shaped reducer computation",
        "iota",
    ),
)
def _b():
    import jax.numpy as jnp

    def f(x):
        return jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), jnp.argmax(x.ravel())

    r = _rng(9)
    return _jax(f, _f(r, (16, 32)))


@_case(
    "jax_maxpool",
    "jax",
    features=(
        "reduce-window max (max pool)",
        "reduce-window add with padding (avg pool)",
        "window size/stride/pad",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x):
        mp = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        ap = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
        return mp, ap

    r = _rng(10)
    return _jax(f, _f(r, (2, 8, 8, 3)))


@_case(
    "jax_take_modes",
    "jax",
    features=(
        "gather",
        "jnp.take mode=fill/clip/wrap/promise_in_bounds",
        "gather offset_dims/collapsed_slice_dims/start_index_map/index_vector_dim/slice_sizes",
        "indices_are_sorted",
    ),
)
def _b():
    import jax.numpy as jnp

    def f(t, idx):
        return (
            jnp.take(t, idx, axis=0),  # default mode: fill
            jnp.take(t, idx, axis=0, mode="clip"),
            jnp.take(t, idx, axis=0, mode="wrap"),
            t.at[jnp.clip(idx, 0, 31)].get(mode="promise_in_bounds"),
            jnp.take(t, idx % 8, axis=1, mode="fill", fill_value=-1.0),
        )

    r = _rng(11)
    return _jax(f, _f(r, (32, 8)), _i(r, (10,), -5, 40))


@_case(
    "jax_index_gather",
    "jax",
    features=(
        "gather from x[idx]",
        "x[idx, 1:3]",
        "x[:, idx]",
        "2-D index arrays",
        "negative index normalisation (select)",
    ),
)
def _b():
    def f(x, idx, idx2):
        return x[idx], x[idx, 1:3], x[:, idx2], x[idx2[:, None], idx2[None, :]]

    r = _rng(12)
    return _jax(f, _f(r, (16, 16)), _i(r, (6,), -16, 16), _i(r, (4,), 0, 16))


@_case(
    "jax_segment_sum",
    "jax",
    features=(
        "scatter add",
        "jax.ops.segment_sum/max",
        "embedding bag (take + segment_sum)",
        "update_window_dims/inserted_window_dims/scatter_dims_to_operand_dims",
    ),
)
def _b():
    import jax
    import jax.numpy as jnp

    def f(table, ids, seg):
        rows = jnp.take(table, ids, axis=0)
        return (
            jax.ops.segment_sum(rows, seg, num_segments=5),
            jax.ops.segment_max(rows, seg, num_segments=5, indices_are_sorted=True),
        )

    r = _rng(13)
    return _jax(f, _f(r, (32, 8)), _i(r, (12,), 0, 32), np.sort(_i(r, (12,), 0, 5)))


@_case(
    "jax_scatter_at",
    "jax",
    features=(
        "scatter with add/assign/max/min/mul combiners",
        ".at[].add/.set/.max/.min/.mul",
        "mode=drop",
        "unique_indices",
    ),
)
def _b():
    import jax.numpy as jnp

    def f(x, idx, u):
        a = x.at[idx].add(u)
        b = x.at[idx].set(u, mode="drop")
        c = x.at[idx].max(u)
        d = x.at[idx].min(u)
        e = x.at[idx].multiply(2.0)
        g = x.at[jnp.arange(3), 1].set(0.0, unique_indices=True)
        return a, b, c, d, e, g

    r = _rng(14)
    return _jax(f, _f(r, (10, 4)), _i(r, (6,), 0, 10), _f(r, (6, 4)))


@_case(
    "jax_fori_loop",
    "jax",
    features=(
        "while (fori_loop)",
        "tuple loop state",
        "get-tuple-element",
        "dynamic-slice / dynamic-update-slice in body",
        "compare LT",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x, w):
        def body(i, carry):
            h, acc = carry
            h = jnp.tanh(h @ w)
            acc = lax.dynamic_update_slice(acc, h[:1], (i, 0))
            return h, acc

        return lax.fori_loop(0, 5, body, (x, jnp.zeros((5, 8), x.dtype)))

    r = _rng(15)
    return _jax(f, _f(r, (4, 8)), _f(r, (8, 8), scale=0.3))


@_case(
    "jax_while_loop",
    "jax",
    features=(
        "while with data-dependent condition",
        "s32 counter",
        "tuple state with mixed dtypes",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x, limit):
        def cond(c):
            i, v, _ = c
            return (jnp.sum(v) < limit) & (i < 50)

        def body(c):
            i, v, n = c
            return i + 1, v * 1.5 + 0.1, n + (v > 1.0).astype(jnp.int32)

        return lax.while_loop(cond, body, (jnp.int32(0), x, jnp.zeros(x.shape, jnp.int32)))

    r = _rng(16)
    return _jax(f, _pos(r, (8,)), np.float32(1000.0))


@_case(
    "jax_cond",
    "jax",
    features=(
        "conditional with pred (true/false computations)",
        "branch operand tuples",
        "scalar pred from compare",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(p, x, y):
        a = lax.cond(p > 0, lambda x, y: (x @ y, jnp.sum(x)), lambda x, y: (x - y, -1.0), x, y)
        b = lax.cond(jnp.sum(x) > 0, jnp.sin, jnp.cos, y)
        return a, b

    r = _rng(17)
    return _jax(f, np.float32(0.5), _f(r, (4, 4)), _f(r, (4, 4)))


@_case(
    "jax_switch",
    "jax",
    features=(
        "conditional with s32 index (branch_computations)",
        "clamp of branch index",
        "3 branches",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(i, x):
        return lax.switch(i, [lambda x: x * 2, jnp.tanh, lambda x: x[::-1]], x)

    r = _rng(18)
    return _jax(f, np.int32(2), _f(r, (8,)))


@_case(
    "jax_nested_call",
    "jax",
    features=(
        "call (nested jax.jit)",
        "computation reused by two calls",
        "nested call inside call",
    ),
)
def _b():
    import jax
    import jax.numpy as jnp

    @jax.jit
    def inner(x):
        return jnp.sin(x) * 2

    @jax.jit
    def middle(x, y):
        return inner(x) + inner(y) @ x

    def f(x, y):
        return middle(x, y) - inner(x * 3)

    r = _rng(19)
    return _jax(f, _f(r, (4, 4)), _f(r, (4, 4)))


@_case(
    "jax_pytree_outputs",
    "jax",
    features=(
        "pytree (dict/list/tuple) inputs flattened",
        "multiple outputs -> tuple ROOT",
        "output aliasing an input",
        "duplicate outputs",
    ),
)
def _b():
    def f(params, x):
        h = x @ params["w"] + params["b"]
        return {"h": h, "stats": [h.sum(), h.max()], "same": (x, h)}

    r = _rng(20)
    params = {"b": _f(r, (8,)), "w": _f(r, (6, 8))}
    return _jax(f, params, _f(r, (3, 6)))


@_case(
    "jax_bf16_arith",
    "jax",
    features=("bf16 arithmetic", "bf16 dot", "bf16 reduce (upcast to f32)", "bf16 constants"),
)
def _b():
    import jax.numpy as jnp
    import ml_dtypes

    def f(x, w):
        y = jnp.tanh(x @ w) * jnp.bfloat16(1.5) + jnp.bfloat16(0.25)
        return y, y.sum(axis=0), jnp.exp(x).max()

    r = _rng(21)
    bf = ml_dtypes.bfloat16
    return _jax(f, _f(r, (8, 16), bf), _f(r, (16, 8), bf, 0.2))


@_case(
    "jax_f16_arith",
    "jax",
    features=("f16 arithmetic", "f16 dot", "f16 reduce", "f16 constants", "f16 sqrt/exp"),
)
def _b():
    import jax.numpy as jnp

    def f(x, w):
        y = jnp.sqrt(jnp.abs(x @ w)) + jnp.float16(0.1) * jnp.exp(x[:, :8])
        return y, y.mean(axis=1)

    r = _rng(22)
    return _jax(f, _f(r, (8, 16), np.float16), _f(r, (16, 8), np.float16, 0.2))


@_case(
    "jax_s64_x64",
    "jax",
    features=("s64", "f64", "u64", "x64 mode", "s64 iota/cumsum", "s64 gather indices"),
)
def _b():
    import jax.numpy as jnp

    def f(a, x, u):
        b = a * 3 + (a >> 2) - jnp.cumsum(a)
        y = x.astype(jnp.float64) * 2.5 + a.astype(jnp.float64)
        return b, y, jnp.take(x, a % 8), u * jnp.uint64(2**40 + 1), jnp.arange(8) + a

    r = _rng(23)
    return _jax(
        f,
        _i(r, (8,), -(2**40), 2**40, np.int64),
        _f(r, (8,), np.float64),
        _i(r, (8,), 0, 2**62, np.uint64),
        x64=True,
    )


@_case(
    "jax_shape_ops",
    "jax",
    features=(
        "iota",
        "broadcast",
        "reshape",
        "transpose",
        "slice with strides",
        "dynamic-slice",
        "dynamic-update-slice",
        "concatenate",
        "pad (edge + interior + negative)",
        "reverse",
        "squeeze/expand_dims",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x, i, u):
        a = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
        b = jnp.broadcast_to(x[0], (3, 8)) + jnp.transpose(x[:8, :3])
        c = x[1:7:2, ::2]
        d = lax.dynamic_slice(x, (i, 2), (3, 4))
        e = lax.dynamic_update_slice(x, u, (i, i))
        g = jnp.concatenate([a, d, c[:, :4]], axis=0)
        h = lax.pad(a, 0.5, ((1, 2, 1), (-1, 0, 0)))
        k = jnp.flip(x, axis=(0, 1))[None, :, :, None].reshape(8, 8)
        return b, g, e, h, k, jnp.expand_dims(c, 0).squeeze(0)

    r = _rng(24)
    return _jax(f, _f(r, (8, 8)), np.int32(3), _f(r, (2, 2)))


@_case(
    "jax_sort",
    "jax",
    features=(
        "sort (single operand, comparator computation)",
        "argsort (multi-operand sort with iota)",
        "sort along axis",
        "is_stable",
        "descending sort",
        "lax.sort_key_val",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x, k):
        return (
            jnp.sort(x, axis=1),
            jnp.argsort(x[0]),
            jnp.sort(x, axis=0, descending=True),
            lax.sort_key_val(k, x[1]),
        )

    r = _rng(25)
    return _jax(f, _f(r, (6, 10)), _i(r, (10,), 0, 5))


@_case(
    "jax_cumsum",
    "jax",
    features=(
        "cumsum/cumprod/cummax (reduce-window with pad)",
        "call to nested jitted cum* functions",
    ),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x, i):
        return jnp.cumsum(x, axis=0), jnp.cumprod(x[:, 0]), lax.cummax(x, axis=1), jnp.cumsum(i)

    r = _rng(26)
    return _jax(f, _f(r, (8, 6)), _i(r, (10,), -4, 4))


@_case(
    "jax_linalg",
    "jax",
    features=(
        "LAPACK FFI custom-calls (potrf, geqrf, trsm, syevd) with column-major "
        "operand_layout_constraints and output_to_operand_aliasing",
    ),
)
def _b():
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    def f(x, b):
        spd = x @ x.T + 6.0 * jnp.eye(6)
        chol = jnp.linalg.cholesky(spd)
        q, r = jnp.linalg.qr(x)
        return chol, q, r, jsl.solve_triangular(chol, b, lower=True), jnp.linalg.eigvalsh(spd)

    r = _rng(30)
    return _jax(f, _f(r, (6, 6)), _f(r, (6, 3)))


@_case(
    "jax_topk_hyperbolic",
    "jax",
    features=("topk (two results)", "sinh/cosh/asinh/acosh/atanh/asin/acos/atan"),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x):
        v, i = lax.top_k(x, 3)
        t = jnp.tanh(x) * 0.9
        h = jnp.sinh(x) + jnp.cosh(x) + jnp.arcsinh(x) + jnp.arccosh(jnp.abs(x) + 1.0)
        return v, i, h + jnp.arctanh(t) + jnp.arcsin(t) + jnp.arccos(t) + jnp.arctan(x)

    r = _rng(31)
    return _jax(f, _f(r, (5, 12)))


@_case(
    "jax_shardy_composite",
    "jax",
    features=(
        "module frontend_attributes holding a dict (Shardy meshes)",
        "a Sharding custom-call",
        "composite call (is_composite, composite.* frontend attributes)",
    ),
)
def _b():
    import jax
    from jax import lax

    def f(x):
        y = jax.lax.with_sharding_constraint(
            x * 2.0, jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0]))
        return lax.composite(lambda v: v * 3.0 + 1.0, name="ember.test.affine")(y)

    r = _rng(32)
    return _jax(f, _f(r, (4, 4)))


@_case(
    "jax_shard_map_collectives",
    "jax",
    features=("shard_map on one device: all-reduce (psum, pmax) with collective_device_list",),
)
def _b():
    import jax
    from jax import shard_map
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices("cpu")[:1]), ("d",))

    def f(x):
        s = shard_map(lambda y: jax.lax.psum(y, "d"), mesh=mesh, in_specs=P("d"), out_specs=P())
        m = shard_map(lambda y: jax.lax.pmax(y, "d"), mesh=mesh, in_specs=P("d"), out_specs=P())
        return s(x) * 2.0, m(x)

    r = _rng(33)
    return _jax(f, _f(r, (4, 6)))


@_case(
    "jax_constants",
    "jax",
    features=(
        "constants of pred, s8, u8, s16, u16, s32, u32, f16, bf16, f32, c64",
        "nan/inf/-inf literals",
        "array constants (non-scalar)",
    ),
)
def _b():
    import jax.numpy as jnp
    import ml_dtypes

    def f(x):
        c = {
            "pred": np.array([True, False, True]),
            "s8": np.array([-128, 0, 127], np.int8),
            "u8": np.array([0, 200, 255], np.uint8),
            "s16": np.array([-32768, 1, 32767], np.int16),
            "u16": np.array([0, 1, 65535], np.uint16),
            "s32": np.array([-(2**31), 0, 2**31 - 1], np.int32),
            "u32": np.array([0, 123456789, 2**32 - 1], np.uint32),
            "f16": np.array([0.1, -65504, np.inf], np.float16),
            "bf16": np.array([0.1, -3.0e38, -np.inf], ml_dtypes.bfloat16),
            "f32": np.array([np.nan, 1e-40, -0.0], np.float32),
            "c64": np.array([1 + 2j, -0.5j, np.nan], np.complex64),
        }
        out = {
            k: jnp.asarray(v) ^ (x > 0)
            if v.dtype == bool
            else jnp.asarray(v) + jnp.asarray(1, v.dtype) * (x > 0).astype(v.dtype)
            for k, v in c.items()
        }
        out["scalar_nan"] = x.astype(jnp.float32) * jnp.float32(np.nan)
        out["scalar_inf"] = x.astype(jnp.float32) + jnp.float32(-np.inf)
        out["f16_scalar"] = jnp.float16(3.140625) * x.astype(jnp.float16)
        out["bf16_scalar"] = jnp.bfloat16(-2.5) * x.astype(jnp.bfloat16)
        out["f32_big"] = jnp.float32(3.4028235e38) + x.astype(jnp.float32)
        out["f32_2d"] = jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3) / 4) + x[:2, None]
        out["s32_3d"] = (
            jnp.asarray(np.arange(12, dtype=np.int32).reshape(2, 3, 2)) * x[None, :, None]
        )
        out["f32_large"] = jnp.asarray(_LARGE_CONST) * x[0]
        return out

    return _jax(f, np.array([1, 0, -1], np.int32))


@_case(
    "jax_complex",
    "jax",
    features=("c64 arithmetic", "complex/real/imag", "abs of c64", "exp of c64", "conj"),
)
def _b():
    import jax.numpy as jnp

    def f(a, b):
        z = a + 1j * b
        w = jnp.exp(z) * jnp.conj(z) + z * z
        return jnp.real(w), jnp.imag(w), jnp.abs(z), w

    r = _rng(27)
    return _jax(f, _f(r, (4, 4)), _f(r, (4, 4)))


@_case(
    "jax_softmax_layernorm",
    "jax",
    features=(
        "softmax (reduce max/sum, stop_gradient)",
        "layernorm (mean/var/rsqrt)",
        "gelu (erf or tanh approx)",
        "broadcast in_dim",
    ),
)
def _b():
    import jax

    def f(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        y = (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b
        return jax.nn.softmax(jax.nn.gelu(y), axis=-1), jax.nn.gelu(y, approximate=False)

    r = _rng(28)
    return _jax(f, _f(r, (8, 32)), _pos(r, (32,)), _f(r, (32,)))


@_case(
    "jax_embedding_bag",
    "jax",
    features=(
        "gather rows (clip, sorted)",
        "scatter-add segment sum (sorted)",
        "mean via segment counts",
        "u32->s32 ids",
    ),
)
def _b():
    import jax
    import jax.numpy as jnp

    def f(table, ids, seg, w):
        rows = jnp.take(table, ids, axis=0, mode="clip") * w[:, None]
        s = jax.ops.segment_sum(rows, seg, num_segments=6, indices_are_sorted=True)
        n = jax.ops.segment_sum(jnp.ones_like(w), seg, num_segments=6, indices_are_sorted=True)
        return s, s / jnp.maximum(n, 1.0)[:, None]

    r = _rng(29)
    return _jax(
        f, _f(r, (64, 16)), _i(r, (20,), 0, 64), np.sort(_i(r, (20,), 0, 6)), _pos(r, (20,))
    )


# ------------------------------------------------------------------- JAX, optimized


def _mlp(x, w1, b1, w2, b2):
    import jax
    import jax.numpy as jnp

    h = jax.nn.relu(x @ w1 + b1)
    return jax.nn.log_softmax(h @ w2 + b2), jnp.tanh(h).sum()


@_case(
    "jax_opt_fusion_mlp",
    "jax",
    optimized=True,
    features=(
        "optimized: kLoop/kInput fusions",
        "kCustom __ynn_fusion dot fusions with backend_config JSON",
        "is_scheduled",
        "FileNames/FunctionNames/FileLocations/StackFrames sections",
        "% name prefixes, typed computation signatures",
    ),
)
def _b():
    r = _rng(40)
    return _jax_opt(
        _mlp,
        _f(r, (8, 16)),
        _f(r, (16, 32), scale=0.3),
        _f(r, (32,)),
        _f(r, (32, 10), scale=0.3),
        _f(r, (10,)),
    )


@_case(
    "jax_opt_conv_net",
    "jax",
    optimized=True,
    features=(
        "optimized conv net: convolution (maybe custom-call/fusion)",
        "reduce-window max pool",
        "relu fusion",
        "dense head",
    ),
)
def _b():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(x, k1, k2, w):
        dn = ("NHWC", "HWIO", "NHWC")
        y = jax.nn.relu(lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn))
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        y = jax.nn.relu(lax.conv_general_dilated(y, k2, (1, 1), "SAME", dimension_numbers=dn))
        return y.mean(axis=(1, 2)) @ w

    r = _rng(41)
    return _jax_opt(
        f,
        _f(r, (2, 16, 16, 3)),
        _f(r, (3, 3, 3, 8), scale=0.3),
        _f(r, (3, 3, 8, 8), scale=0.3),
        _f(r, (8, 4)),
    )


@_case(
    "jax_opt_reduction",
    "jax",
    optimized=True,
    features=(
        "optimized reductions",
        "multi-output (tuple) fusion",
        "argmax variadic reduce in fusion",
        "transposes",
    ),
)
def _b():
    import jax
    import jax.numpy as jnp

    def f(x):
        return (
            x.sum(axis=0),
            jnp.max(x, axis=1),
            jnp.argmax(x, axis=1),
            jax.nn.logsumexp(x.T, axis=0),
            (x * x).mean(),
        )

    r = _rng(42)
    return _jax_opt(f, _f(r, (32, 48)))


@_case(
    "jax_opt_gather_scatter",
    "jax",
    optimized=True,
    features=("optimized gather", "optimized scatter (segment_sum, .at[].set)", "embedding bag"),
)
def _b():
    import jax
    import jax.numpy as jnp

    def f(table, ids, seg, upd_idx, upd):
        rows = jnp.take(table, ids, axis=0, mode="clip")
        bags = jax.ops.segment_sum(rows, seg, num_segments=8, indices_are_sorted=True)
        t2 = table.at[upd_idx].set(upd)
        return bags, t2[ids].sum(axis=1) + jnp.asarray(_LARGE_CONST[:24, 0])

    r = _rng(43)
    return _jax_opt(
        f,
        _f(r, (64, 16)),
        _i(r, (24,), 0, 64),
        np.sort(_i(r, (24,), 0, 8)),
        _i(r, (4,), 0, 64),
        _f(r, (4, 16)),
    )


@_case(
    "jax_opt_control_flow",
    "jax",
    optimized=True,
    features=("optimized while loop", "optimized conditional", "loop-invariant hoisting / copies"),
)
def _b():
    import jax.numpy as jnp
    from jax import lax

    def f(x, w, p):
        def body(i, h):
            return jnp.tanh(h @ w) + i.astype(jnp.float32) * 0.01

        h = lax.fori_loop(0, 4, body, x)
        return lax.cond(p > 0, lambda h: h.sum(axis=0), lambda h: h.max(axis=0), h)

    r = _rng(44)
    return _jax_opt(f, _f(r, (8, 16)), _f(r, (16, 16), scale=0.3), np.float32(1.0))


@_case(
    "jax_opt_sort_cumsum",
    "jax",
    optimized=True,
    features=(
        "optimized sort",
        "optimized cumsum (reduce-window)",
        "bf16 in optimized HLO",
        "s64 in optimized HLO",
    ),
)
def _b():
    import jax.numpy as jnp

    def f(x, b):
        return jnp.sort(x, axis=1), jnp.argsort(x[0]), jnp.cumsum(x, axis=1), (b * b).sum(0)

    import ml_dtypes

    r = _rng(45)
    return _jax_opt(f, _f(r, (8, 16)), _f(r, (8, 8), ml_dtypes.bfloat16))


# -------------------------------------------------------------------------------- TF


def _tf_fn(fn):
    import tensorflow as tf

    return tf.function(fn, jit_compile=True, autograph=True)


@_case(
    "tf_dense_vars",
    "tf",
    features=(
        "TF variables as extra entry parameters",
        "parameter_replication",
        "frontend_attributes grad_x/grad_y",
        "metadata op_type/op_name/source_file/source_line",
        "XLA_Retvals tuple + get-tuple-element",
        "typed operands in text",
        "sigmoid/relu/tanh",
    ),
)
def _b():
    import tensorflow as tf

    r = _rng(50)
    w1 = tf.Variable(_f(r, (16, 32), scale=0.3), name="w1")
    b1 = tf.Variable(_f(r, (32,)), name="b1")
    w2 = tf.Variable(_f(r, (32, 4), scale=0.3), name="w2")

    def f(x):
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        return tf.sigmoid(tf.matmul(h, w2)), tf.tanh(h)

    return _tf_ir(_tf_fn(f), [_f(r, (8, 16))])


@_case(
    "tf_elementwise",
    "tf",
    features=(
        "TF elementwise math",
        "exp/log/sqrt/rsqrt/square/softplus",
        "integer ops (s32 FloorDiv/FloorMod)",
        "cast",
        "select",
        "compare",
        "logical ops",
    ),
)
def _b():
    import tensorflow as tf

    big = tf.constant(_LARGE_CONST[:8, :1] + np.zeros((8, 8), np.float32))

    def f(x, y, i, j):
        a = (
            tf.exp(x)
            + tf.math.log(tf.abs(y) + 1.0)
            + tf.sqrt(tf.abs(x))
            + tf.math.rsqrt(tf.abs(y) + 1.0)
            + tf.square(x)
            + tf.nn.softplus(y)
            + tf.math.sigmoid(x)
        )
        k = tf.math.floordiv(i, tf.where(j == 0, 1, j)) + tf.math.floormod(i, 7) + (i * j)
        m = tf.logical_and(x > y, tf.logical_not(i > 0))
        inner = tf.constant(_LARGE_CONST[:32].reshape(8, 16))  # in-graph: an HLO constant
        return (
            tf.where(m, a, -a) * big + inner[:, :8] * inner[:, 8:],
            k,
            tf.cast(k, tf.float32) + tf.cast(m, tf.float32),
        )

    r = _rng(51)
    return _tf_ir(
        _tf_fn(f), [_f(r, (8, 8)), _f(r, (8, 8)), _i(r, (8, 8), -50, 50), _i(r, (8, 8), -5, 5)]
    )


@_case(
    "tf_resize_outer_dot",
    "tf",
    features=("tf.image.resize (bilinear): an outer-product dot, empty contracting dims",),
)
def _b():
    import tensorflow as tf

    r = _rng(53)

    def f(x):
        return tf.image.resize(x[None, :, :, None], (8, 12))[0, :, :, 0]

    return _tf_ir(_tf_fn(f), [_f(r, (4, 6))])


@_case(
    "tf_conv2d_pool",
    "tf",
    features=(
        "tf.nn.conv2d NHWC (convolution b01f_01io->b01f)",
        "tf.nn.max_pool2d (reduce-window)",
        "bias_add",
        "TF kernel variable",
    ),
)
def _b():
    import tensorflow as tf

    r = _rng(52)
    k = tf.Variable(_f(r, (3, 3, 3, 8), scale=0.3), name="kernel")
    bias = tf.Variable(_f(r, (8,)), name="bias")

    def f(x):
        y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, k, strides=1, padding="SAME"), bias))
        y = tf.nn.max_pool2d(y, ksize=2, strides=2, padding="VALID")
        z = tf.nn.conv2d(x, k, strides=2, padding="VALID")
        return y, tf.reduce_mean(z, axis=[1, 2])

    return _tf_ir(_tf_fn(f), [_f(r, (2, 12, 12, 3))])


@_case(
    "tf_gather_segment",
    "tf",
    features=(
        "tf.gather (gather)",
        "tf.gather batch_dims",
        "tf.math.unsorted_segment_sum/max (scatter)",
        "embedding table variable",
        "tf.argmax (variadic reduce)",
    ),
)
def _b():
    import tensorflow as tf

    r = _rng(53)
    table = tf.Variable(_f(r, (40, 8)), name="table")

    def f(ids, seg, idx2):
        rows = tf.gather(table, ids)
        s = tf.math.unsorted_segment_sum(rows, seg, num_segments=5)
        mx = tf.math.unsorted_segment_max(rows, seg, num_segments=5)
        bg = tf.gather(tf.reshape(rows[:12], (3, 4, 8)), idx2, batch_dims=1)
        return s, mx, bg, tf.argmax(rows, axis=1)

    return _tf_ir(_tf_fn(f), [_i(r, (12,), 0, 40), _i(r, (12,), 0, 5), _i(r, (3, 2), 0, 4)])


@_case(
    "tf_while",
    "tf",
    features=("tf.while_loop -> while", "TF loop tuple state", "variable read inside loop body"),
)
def _b():
    import tensorflow as tf

    r = _rng(54)
    w = tf.Variable(_f(r, (8, 8), scale=0.3), name="w")

    def f(x, n):
        def cond(i, h):
            return i < n

        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w))

        return tf.while_loop(cond, body, (tf.constant(0), x))

    return _tf_ir(_tf_fn(f), [_f(r, (4, 8)), np.int32(5)])


@_case(
    "tf_cond",
    "tf",
    features=(
        "tf.cond -> conditional",
        "python if via autograph",
        "tf.switch_case -> indexed conditional",
    ),
)
def _b():
    import tensorflow as tf

    def f(p, i, x):
        a = tf.cond(p > 0, lambda: tf.reduce_sum(x, axis=0), lambda: tf.reduce_max(x, axis=0))
        b = tf.switch_case(i, [lambda: x[0] * 2.0, lambda: tf.exp(x[1]), lambda: -x[2]])
        return a, b

    r = _rng(55)
    return _tf_ir(_tf_fn(f), [np.float32(-1.0), np.int32(1), _f(r, (4, 6))])


@_case(
    "tf_int64",
    "tf",
    features=(
        "s64 from TF int64",
        "tf.range (iota) int64",
        "int64 cumsum",
        "int64 gather indices",
        "tf.sort / argsort (sort)",
        "tf.reverse",
        "tf.pad",
        "tf.concat",
        "tf.transpose",
        "strided slice",
    ),
)
def _b():
    import tensorflow as tf

    def f(a, x):
        b = a * 3 + tf.math.cumsum(a) + tf.range(8, dtype=tf.int64)
        g = tf.gather(x, a % 8)
        s = tf.sort(x, direction="DESCENDING")
        o = tf.argsort(x)
        m = tf.reshape(x, (2, 4))
        p = tf.pad(tf.transpose(m), [[1, 0], [0, 2]], constant_values=-1.0)
        c = tf.concat([tf.reverse(m, axis=[1]), m[:, ::2][:, :1] * 0 + m[:, 1:2]], axis=1)
        return b, g, s, o, p, c

    r = _rng(56)
    return _tf_ir(_tf_fn(f), [_i(r, (8,), -1000, 1000, np.int64), _f(r, (8,))])


@_case(
    "tf_bf16_f16", "tf", features=("TF bf16 / f16 arithmetic", "casts", "dtype-specific constants")
)
def _b():
    import ml_dtypes
    import tensorflow as tf

    def f(x, h):
        y = tf.matmul(x, tf.transpose(x)) * tf.constant(0.5, tf.bfloat16)
        z = tf.nn.relu(h) + tf.constant(1.5, tf.float16)
        return y, z, tf.cast(y, tf.float32) + tf.reduce_sum(tf.cast(z, tf.float32))

    r = _rng(57)
    return _tf_ir(_tf_fn(f), [_f(r, (4, 8), ml_dtypes.bfloat16), _f(r, (4, 8), np.float16)])


@_case(
    "tf_opt_dense",
    "tf",
    optimized=True,
    features=(
        "TF optimized_hlo",
        "alias_passthrough_params",
        "fusions with TF metadata",
        "variables",
    ),
)
def _b():
    import tensorflow as tf

    r = _rng(58)
    w = tf.Variable(_f(r, (16, 16), scale=0.3), name="w")
    b = tf.Variable(_f(r, (16,)), name="b")

    def f(x):
        h = tf.nn.relu(tf.matmul(x, w) + b)
        return tf.nn.softmax(h), tf.reduce_sum(h * h, axis=1)

    return _tf_ir(_tf_fn(f), [_f(r, (8, 16))], optimized=True)


@_case(
    "tf_opt_embedding",
    "tf",
    optimized=True,
    features=("TF optimized gather + unsorted_segment_sum", "optimized scatter"),
)
def _b():
    import tensorflow as tf

    r = _rng(59)
    table = tf.Variable(_f(r, (64, 8)), name="table")

    def f(ids, seg):
        return tf.math.unsorted_segment_sum(tf.gather(table, ids), seg, num_segments=6)

    return _tf_ir(_tf_fn(f), [_i(r, (20,), 0, 64), np.sort(_i(r, (20,), 0, 6))], optimized=True)


# ----------------------------------------------------------------------- SavedModel


def _savedmodel_roundtrip(module, sig_specs):
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="ember_corpus_sm_") as d:
        tf.saved_model.save(module, d, signatures=sig_specs)
        return tf.saved_model.load(d)


@_case(
    "savedmodel_dense",
    "savedmodel",
    features=(
        "SavedModel reload of a jit_compile method",
        "restored variables as entry parameters",
        "call of loaded function",
    ),
)
def _b():
    import tensorflow as tf

    r = _rng(60)

    class Dense(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(_f(r, (8, 4), scale=0.5), name="w")
            self.b = tf.Variable(_f(r, (4,)), name="b")

        @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([None, 8], tf.float32)])
        def __call__(self, x):
            return tf.nn.relu(tf.matmul(x, self.w) + self.b)

    loaded = _savedmodel_roundtrip(Dense(), None)
    return _tf_ir(loaded.__call__, [_f(r, (4, 8))])


@_case(
    "savedmodel_signature",
    "savedmodel",
    features=(
        "SavedModel serving signature wrapped in a new jit_compile tf.function",
        "dict outputs",
        "gather embedding lookup",
        "StatefulPartitionedCall inlined",
    ),
)
def _b():
    import tensorflow as tf

    r = _rng(61)

    class Emb(tf.Module):
        def __init__(self):
            super().__init__()
            self.table = tf.Variable(_f(r, (32, 8)), name="table")
            self.scale = tf.Variable(np.float32(0.5), name="scale")

        @tf.function(input_signature=[tf.TensorSpec([6], tf.int32)])
        def lookup(self, ids):
            e = tf.nn.embedding_lookup(self.table, ids) * self.scale
            return {"emb": e, "norm": tf.norm(e, axis=1)}

    m = Emb()
    loaded = _savedmodel_roundtrip(m, {"serving_default": m.lookup})
    sig = loaded.signatures["serving_default"]

    @tf.function(jit_compile=True)
    def wrapped(ids):
        return sig(ids=ids)

    return _tf_ir(wrapped, [_i(r, (6,), 0, 32)])


# Optimized cases XLA's own HLO->StableHLO importer cannot take back unchanged (ember_xla's
# legalization handles them; test_corpus_sanity.py checks this list is current).
BITCAST = "bitcast (optimized HLO) needs bitcast->reshape legalization"
KCUSTOM = "kCustom (__ynn_fusion) fusion loses backend_config in hlo_to_stablehlo"
LAYOUT = "non-default layout (e.g. transpose to {0,1} + copy) is dropped by hlo_to_stablehlo"
KNOWN_BLOCKED: dict[str, tuple[str, ...]] = {
    "jax_opt_fusion_mlp": (KCUSTOM,),
    "jax_opt_conv_net": (KCUSTOM,),
    "jax_opt_reduction": (LAYOUT,),
    "jax_opt_gather_scatter": (BITCAST,),
    "jax_opt_control_flow": (KCUSTOM,),
    "jax_opt_sort_cumsum": (BITCAST,),
    "tf_opt_embedding": (BITCAST,),
}
