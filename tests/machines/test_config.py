"""Target descriptions: the shipped ones load; every kind of bad file is a one-line error
naming the file, the key and what was expected."""

import tomllib
from pathlib import Path

import pytest

from ember_xla.machines.config import TargetError, builtin_configs, load_target, parse_target


@pytest.mark.parametrize("name", ["tmu", "tiny", "tmu8"])
def test_shipped_targets_load(name):
    t = load_target(name)
    assert t.name == name and t.cores >= 1 and t.caches


def test_tmu_has_the_evaluated_access_unit():
    t = load_target("tmu")
    a = t.access
    assert (a.lanes, a.layers, a.data_queue_bytes, a.outstanding_requests) == (8, 4, 2048, 128)
    assert t.execute.vector_bits == 512
    assert t.dram_latency_cycles == t.dram.latency_ns * t.clock_ghz


def test_tmu8_is_eight_tmu_cores_sharing_llc_and_banked_dram():
    t, one = load_target("tmu8"), load_target("tmu")
    assert t.cores == 8 and t.access == one.access and t.execute == one.execute
    assert [c.shared for c in t.caches] == [False, False, True] and t.private_levels == 2
    b = t.dram.banks
    assert b is not None and (b.channels, b.banks_per_channel) == (4, 32)
    assert one.dram.banks is None


def tmu_data():
    return tomllib.loads((builtin_configs() / "tmu.toml").read_text())


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["access_unit"].pop("lanes"), r"access_unit\.lanes: missing"),
    (lambda d: d["access_unit"].update(lanes="8"), r"access_unit\.lanes: expected an integer"),
    (lambda d: d["access_unit"].update(lanes=0), r"access_unit\.lanes: expected a positive"),
    (lambda d: d["access_unit"].update(lockstep=1), r"access_unit\.lockstep: expected true"),
    (lambda d: d["access_unit"].update(lanez=3), r"access_unit\.lanez: unknown key"),
    (lambda d: d.update(dramm={}), r"\[dramm\]: unknown section"),
    (lambda d: d["execute_unit"]["op_cycles"].pop("add"), r"op_cycles\.add: expected"),
    (lambda d: d["execute_unit"].update(vector_bits=100), r"vector_bits: expected a multiple"),
    (lambda d: d["cache"][0].update(size_bytes=1000), r"cache\[0\]\.size_bytes"),
    (lambda d: d.update(cache=[]), r"\[\[cache\]\]: expected at least one"),
    (lambda d: d["dram"].update(latency_ns=-1.0), r"dram\.latency_ns: expected a positive"),
    (lambda d: d["dram"].update(channels=2), r"dram\.banks_per_channel: missing"),
    (lambda d: d["dram"].update(channels=2, banks_per_channel=4, row_bytes=100, row_hit_ns=1,
                                row_miss_ns=2), r"dram\.row_bytes: expected a multiple"),
    (lambda d: d["dram"].update(channels=0, banks_per_channel=4, row_bytes=128, row_hit_ns=1,
                                row_miss_ns=2), r"dram\.channels: expected a positive"),
    (lambda d: d["cache"][0].update(shared=True), r"a private level after a shared one"),
])
def test_bad_descriptions_name_file_key_and_expectation(edit, match):
    d = tmu_data()
    edit(d)
    with pytest.raises(TargetError, match=match) as e:
        parse_target(d, "my.toml")
    assert str(e.value).startswith("my.toml: ") and "\n" not in str(e.value)


def test_missing_and_malformed_files(tmp_path: Path):
    with pytest.raises(TargetError, match="no such target file.*shipped targets: .*tmu"):
        load_target(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[target\nname = 1")
    with pytest.raises(TargetError, match="bad.toml: not valid TOML"):
        load_target(bad)
