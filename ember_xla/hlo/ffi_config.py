"""Import-time check of a typed-FFI custom-call's ``backend_config`` (an MLIR attribute
dictionary). XLA:CPU keeps the string opaque when it parses HLO, then parses it as MLIR while
compiling, and on some malformed dictionaries it prints an MLIR error and *crashes the process*
(segfault in ``hlo_to_stablehlo``; docs/CUSTOM_CALL.md). The known crash forms are caught here
so the user gets a one-line error naming the instruction instead:

- a float-typed literal without a decimal point (``init = -1 : f64``, ``3e5 : f64``: MLIR
  wants ``-1.0``, ``3.0e5``);
- ``inf`` / ``nan`` spelled as words (MLIR takes infinities and NaN only as hex bit patterns);
- unbalanced braces, brackets or quotes; a key without ``=`` and value is MLIR's unit attribute
  and is accepted.

The check is deliberately lenient on value forms it does not know (``#dialect.attr<...>``,
``dense<...>``, affine maps): they are skipped as balanced text, never rejected."""

from __future__ import annotations

import re

from ember_xla.ir.operation import Operation

TYPED_FFI = ("API_VERSION_TYPED_FFI", 4)
_FLOAT_TYPE = re.compile(r"(?:bf16|f16|f32|f64|f80|f128|tf32|f8\w*)$")
_NO_POINT = re.compile(r"[-+]?[0-9]+(?:[eE][-+]?[0-9]+)?$")  # 3, -1, 3e5: no decimal point
_NUMBER_WITH_TYPE = re.compile(
    r"\s*([-+]?[0-9A-Za-z_.]+(?:[eE][-+]?[0-9]+)?)\s*:\s*([A-Za-z0-9_]+)")
_CLOSE = {"{": "}", "[": "]", "<": ">", "(": ")"}


def _values(text: str) -> list[str] | str:
    """Split the top level of ``{k = v, ...}`` into the raw value texts; a str is a problem."""
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        return "is not an MLIR attribute dictionary {key = value, ...}"
    stack: list[str] = []
    parts: list[str] = []
    start = 1
    i = 1
    while i < len(t) - 1:
        ch = t[i]
        if ch == '"':
            j = i + 1
            while j < len(t) - 1 and t[j] != '"':
                j += 2 if t[j] == "\\" else 1
            if j >= len(t) - 1:
                return "has an unterminated string"
            i = j + 1
            continue
        if ch in _CLOSE:
            stack.append(_CLOSE[ch])
        elif ch in "}])>":
            if ch == ">" and (not stack or stack[-1] != ">"):
                pass  # a '>' outside angle brackets (e.g. inside an affine map's '->')
            elif not stack or stack.pop() != ch:
                return f"has an unbalanced {ch!r} at column {i + 1}"
        elif ch == "," and not stack:
            parts.append(t[start:i])
            start = i + 1
        i += 1
    if stack:
        return f"has an unclosed {stack[-1]!r}"
    last = t[start:-1]
    if last.strip() or parts:
        parts.append(last)
    return parts


def check_backend_config(op: Operation) -> str | None:
    """The problem with a typed-FFI custom-call's ``backend_config``, or ``None``."""
    if op.opcode != "custom-call":
        return None
    if op.attributes.get("custom_call_api_version") not in TYPED_FFI:
        return None
    raw = op.attributes.get("backend_config", b"")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if not text.strip():
        return None
    parts = _values(text)
    if isinstance(parts, str):
        return f"backend_config {parts} (XLA:CPU crashes on it): {text[:80]!r}"
    for part in parts:
        key, eq, value = part.partition("=")
        if not eq:
            continue  # a unit attribute
        value = value.strip()
        m = _NUMBER_WITH_TYPE.fullmatch(value)
        bare = (m.group(1) if m else value).lstrip("-+").lower()
        if bare in ("inf", "infinity", "nan"):
            return (f"backend_config attribute {key.strip()} = {value}: MLIR takes inf/NaN only "
                    f"as hex bit patterns (e.g. 0xFFF0000000000000 : f64 for -inf)")
        if m and _FLOAT_TYPE.match(m.group(2)) and _NO_POINT.match(m.group(1)):
            return (f"backend_config attribute {key.strip()} = {value}: a float literal needs "
                    f"a decimal point (write e.g. 1.0 or 3.0e5); XLA:CPU crashes "
                    f"on it")
    return None
