"""Golden text tests: our HLO parser + printer on a hand-written module with many attribute
forms; the printed text is fixed, parses back to itself, and XLA agrees on what it means."""

import pathlib

import numpy as np

from ember_xla.hlo.parser import parse_module
from ember_xla.hlo.printer import print_module
from ember_xla.hlo.verifier import verify_module
from ember_xla.hlo_import.proto import module_to_proto
from ember_xla.runtime.inputs import random_inputs
from ember_xla.runtime.xla_cpu import compile_proto, xla_parse_text

GOLDEN = pathlib.Path(__file__).parents[1] / "golden" / "hlo"


def test_canonical_prints_as_expected():
    src = (GOLDEN / "canonical.hlo").read_text()
    expected = (GOLDEN / "canonical.expected.hlo").read_text()
    m = parse_module(src, "canonical.hlo")
    verify_module(m)
    assert print_module(m) == expected


def test_printed_text_is_a_fixpoint():
    expected = (GOLDEN / "canonical.expected.hlo").read_text()
    assert print_module(parse_module(expected)) == expected


def test_xla_reads_our_text_and_proto_the_same_way():
    text = (GOLDEN / "canonical.expected.hlo").read_text()
    m = parse_module(text)
    ours = compile_proto(module_to_proto(m))
    xlas = compile_proto(xla_parse_text(text))
    inputs = random_inputs(m, seed=3)
    a, b = ours.run(inputs), xlas.run(inputs)
    assert len(a) == 7
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()
    # and the numbers are right, not just equal: a few outputs against numpy
    x, idx = inputs[0], inputs[1]
    np.testing.assert_array_equal(a[1], x[idx])
    np.testing.assert_array_equal(a[3], x.max(axis=1))
    np.testing.assert_array_equal(a[5], x[0:4:2, 1:4])
    np.testing.assert_allclose(a[0], x ** 8, rtol=1e-5)


def test_hlo_dialect_hooks_parse_verify_and_print():
    from ember_xla.ir.dialect import get_dialect

    hlo = get_dialect("hlo")
    expected = (GOLDEN / "canonical.expected.hlo").read_text()
    m = hlo.parse_module(expected, "canonical.expected.hlo")
    hlo.verify_module(m)
    assert hlo.print_module(m) == expected


def test_collective_device_lists_print_as_replica_groups():
    """A collective's device list (explicit or XLA's iota form) prints as the explicit
    ``replica_groups`` XLA's parser reads: ``[2,2]<=[4]`` is {0,1},{2,3}; ``[2,2]<=[2,2]T(1,0)``
    is {0,2},{1,3}."""
    from ember_xla.hlo.attr_print import print_attrs

    def text(cdl):
        return [t for t in print_attrs("all-reduce", {"collective_device_list": cdl})
                if t.startswith("replica_groups")]

    iota = {"num_replica_groups": 2, "num_devices_per_group": 2, "iota_reshape_dims": [4]}
    assert text({"iota_replica_group_list": iota}) == ["replica_groups={{0,1},{2,3}}"]
    iota = {**iota, "iota_reshape_dims": [2, 2], "iota_transpose_perm": [1, 0]}
    assert text({"iota_replica_group_list": iota}) == ["replica_groups={{0,2},{1,3}}"]
    explicit = {"replica_groups": [{"replica_ids": [0]}]}
    assert text(explicit) == ["replica_groups={{0}}"]
