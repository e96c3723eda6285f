"""Mutations of valid modules for the fuzzer: byte-level (truncation, bit flips, byte edits,
chunk deletion/duplication) for protos, token-level (delete, duplicate, swap, replace by a
number, an opcode, a shape or a deep tuple) for HLO text. Deterministic given the rng."""

from __future__ import annotations

import random
import re

_TOKEN = re.compile(r"%?[A-Za-z_][\w.\-]*|-?\d+(?:\.\d+)?|\S")
_NUMBERS = ["0", "1", "-1", "2", "11", "-9", "4294967296", "9223372036854775807",
            "9223372036854775808", "99999999999", "1e39", "nan", "-inf"]
_WORDS = ["add", "and", "tuple", "parameter", "reduce", "scatter", "gather", "call", "while",
          "constant", "f32[]", "s32[-1]", "f16[2147483648,4]", "(f32[], s32[])", "ROOT",
          "to_apply", "dimensions", "{", "}", "(", ")", ",", "=", "%x", "/*", "\"", "0.5"]


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0 or not b:
        return bytes(b[: rng.randrange(len(b) + 1)])
    if kind == 1:
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 2:
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        return bytes(b)
    i = rng.randrange(len(b))
    j = min(len(b), i + rng.randint(1, 64))
    if kind == 3:
        return bytes(b[:i] + b[j:])
    return bytes(b[:j] + b[i:j] + b[j:])


def deep_tuple(depth: int) -> str:
    return "(" * depth + "f32[]" + ")" * depth


def mutate_text(text: str, rng: random.Random) -> str:
    spans = [m.span() for m in _TOKEN.finditer(text)]
    if not spans:
        return text
    kind = rng.randrange(8)
    i0, i1 = spans[rng.randrange(len(spans))]
    if kind == 0:
        return text[: rng.randrange(len(text) + 1)]
    if kind == 1:
        return text[:i0] + text[i1:]
    if kind == 2:
        return text[:i1] + " " + text[i0:i1] + text[i1:]
    if kind == 3:
        j0, j1 = spans[rng.randrange(len(spans))]
        if j0 < i0:
            (i0, i1), (j0, j1) = (j0, j1), (i0, i1)
        if j0 < i1:
            return text
        return text[:i0] + text[j0:j1] + text[i1:j0] + text[i0:i1] + text[j1:]
    if kind == 4:
        nums = [s for s in spans if text[s[0]:s[1]].lstrip("-").isdigit()] or spans
        n0, n1 = rng.choice(nums)
        return text[:n0] + rng.choice(_NUMBERS) + text[n1:]
    if kind == 5:
        return text[:i0] + rng.choice(_WORDS) + text[i1:]
    if kind == 6:
        shapes = [m.span() for m in re.finditer(r"\b[fsu]\d+\[[\d,]*\](\{[\d,]*\})?", text)]
        if not shapes:
            return text
        s0, s1 = rng.choice(shapes)
        return text[:s0] + rng.choice([deep_tuple(rng.choice([40, 100, 300])),
                                       "s32[-1]", "f32[9223372036854775808]",
                                       "f32[99999999999]"]) + text[s1:]
    lines = text.split("\n")
    k = rng.randrange(len(lines))
    lines.insert(rng.randrange(len(lines) + 1), lines[k])
    return "\n".join(lines)
