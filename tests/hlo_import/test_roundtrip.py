"""The corpus round trip: every module made by JAX/TF (incl. XLA's optimized HLO with fusions)
goes proto -> IR -> proto and text -> IR -> text with our importers, passes our verifier, and
runs on XLA:CPU with outputs bit-identical to the framework's own outputs."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ember_xla.hlo.parser import parse_module
from ember_xla.hlo.printer import print_module
from ember_xla.hlo.verifier import verify_module
from ember_xla.hlo_import.proto import module_from_proto, module_to_proto
from ember_xla.runtime.execute import executable_proto, run_module
from ember_xla.runtime.xla_cpu import compile_proto, xla_parse_text

corpus = sys.modules["tests_hlo_import_corpus"]  # loaded by conftest.py

NAMES = [c.name for c in corpus.CASES]


def test_corpus_is_big_and_varied():
    assert len(NAMES) >= 30
    assert sum(c.optimized for c in corpus.CASES) >= 4
    assert {c.source for c in corpus.CASES} == {"jax", "tf", "savedmodel"}


def same_bits(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        b = np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (what, i, a.shape, b.shape, a.dtype)
        assert a.tobytes() == b.tobytes(), (what, i, a, b)


_REFERENCE: dict[str, list[np.ndarray]] = {}


def reference(name: str) -> list[np.ndarray]:
    """The original module's outputs on XLA:CPU. Modules XLA's importer cannot take back as
    they are (optimized HLO with bitcasts, kCustom fusions, non-default layouts: see the
    corpus' KNOWN_BLOCKED) are compared with what the framework itself computed when it
    compiled them with the same XLA."""
    if name not in _REFERENCE:
        proto, _, inputs = corpus.build(name)
        if name in corpus_blocked():
            _REFERENCE[name] = [np.asarray(x) for x in corpus.expected(name)]
        else:
            _REFERENCE[name] = compile_proto(proto).run(inputs)
    return _REFERENCE[name]


def corpus_blocked() -> set[str]:
    return set(corpus.KNOWN_BLOCKED)


def _hlo_pb2():
    from tensorflow.compiler.xla.service import hlo_pb2

    return hlo_pb2


@pytest.mark.parametrize("name", NAMES)
def test_proto_roundtrip(name):
    proto, _, inputs = corpus.build(name)
    m = module_from_proto(proto, name)
    verify_module(m)
    out = module_to_proto(m)
    # lossless: the same message, field for field (the schedule is dropped on import)
    hlo_pb2 = _hlo_pb2()
    a = hlo_pb2.HloModuleProto.FromString(proto)
    a.ClearField("schedule")
    b = hlo_pb2.HloModuleProto.FromString(out)
    assert a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)
    same_bits(run_module(module_from_proto(out), inputs), reference(name), "proto")
    # the proto's module printed as text (what `rewrite` writes as rewritten.hlo) is read by
    # XLA's parser as it reads XLA's own text (which differs from the proto in one place: it
    # reads a complex constant (nan, 0) as nan+nanj)
    text = corpus.build(name)[1]
    same_bits(run_module(module_from_proto(xla_parse_text(print_module(m))), inputs),
              run_module(module_from_proto(xla_parse_text(text)), inputs),
              "the proto's module as our text vs XLA's text, both through XLA's parser")


@pytest.mark.parametrize("name", NAMES)
def test_text_roundtrip(name):
    _, text, inputs = corpus.build(name)
    m = parse_module(text, name)
    verify_module(m)
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed  # our text is a fixpoint
    # XLA's own parser reads our text exactly as it reads its own ...
    ours_via_xla = run_module(module_from_proto(xla_parse_text(printed)), inputs)
    xla_via_xla = run_module(module_from_proto(xla_parse_text(text)), inputs)
    same_bits(ours_via_xla, xla_via_xla, "our text vs XLA's text, both through XLA's parser")
    # ... and our proto export of the parsed text means the same, as does our own text read
    # back by our parser (what `ember-xla run` does with a written rewritten.hlo)
    same_bits(compile_proto(executable_proto(m)).run(inputs), reference(name),
              "text via our proto")
    same_bits(compile_proto(executable_proto(parse_module(printed))).run(inputs),
              reference(name), "our text via our parser and our proto")
