"""The HLO opcodes XLA knows, with the operand counts the verifier can check."""

from __future__ import annotations

UNARY = {
    "abs", "bitcast", "bitcast-convert", "broadcast", "cbrt", "ceil", "convert", "copy",
    "cosine", "erf", "exponential", "exponential-minus-one", "floor", "imag", "is-finite",
    "count-leading-zeros",
    "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "real", "reduce-precision",
    "reshape", "reverse", "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine",
    "slice", "sqrt", "tan", "tanh", "transpose", "get-tuple-element", "copy-start", "copy-done",
    "cholesky", "fft", "get-dimension-size", "stochastic-convert-unused",
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "shuffle", "topk",
}
BINARY = {
    "add", "and", "atan2", "compare", "complex", "divide", "dot", "maximum", "minimum",
    "multiply", "or", "power", "remainder", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "subtract", "xor", "convolution", "gather", "set-dimension-size",
    "stochastic-convert", "triangular-solve", "add-dependency", "mulhi",
}
TERNARY = {"clamp", "select", "dynamic-update-slice-unused"}
NULLARY = {"constant", "iota", "parameter", "partition-id", "replica-id",
           "rng-get-and-update-state"}
VARIADIC = {
    "after-all", "all-gather", "all-gather-start", "all-gather-done", "all-reduce",
    "all-reduce-start", "all-reduce-done", "all-to-all", "async-start", "async-update",
    "async-done", "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "call",
    "collective-broadcast", "collective-permute", "collective-permute-start",
    "collective-permute-done", "concatenate", "conditional", "custom-call", "domain",
    "dynamic-reshape", "dynamic-slice", "dynamic-update-slice", "fusion", "infeed", "map",
    "opt-barrier", "outfeed", "pad", "ragged-all-to-all", "ragged-dot", "recv",
    "recv-done", "reduce", "reduce-scatter", "reduce-window", "rng", "rng-bit-generator",
    "scatter", "select-and-scatter", "send", "send-done", "sort", "tuple", "while",
    "composite", "collective-reduce", "scaled-dot", "scan",
}

ARITY: dict[str, int] = {}
ARITY.update({k: 1 for k in UNARY})
ARITY.update({k: 2 for k in BINARY})
ARITY.update({k: 3 for k in TERNARY})
ARITY.update({k: 0 for k in NULLARY})
ARITY.pop("stochastic-convert-unused")
ARITY.pop("dynamic-update-slice-unused")
ARITY["pad"] = 2
ARITY["while"] = 1

OPCODES: frozenset[str] = frozenset(ARITY) | frozenset(VARIADIC)

# Elementwise opcodes whose result shape equals their (first) operand's dims.
ELEMENTWISE = (UNARY - {
    "bitcast", "broadcast", "reshape", "reverse", "slice", "transpose", "get-tuple-element",
    "copy-start", "copy-done", "cholesky", "fft", "get-dimension-size", "bitcast-convert",
    "stochastic-convert-unused", "shuffle", "topk",
}) | (BINARY - {
    "dot", "convolution", "gather", "set-dimension-size", "triangular-solve", "add-dependency",
    "stochastic-convert",
}) | {"clamp", "select"}
