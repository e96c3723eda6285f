"""The NPU target description: configs/npu.toml loads with its DMA / unified buffer /
scratchpad timing; the DAE targets load unchanged (no NPU part); bad NPU keys are one-line
errors naming the file, the key and what was expected."""

import tomllib

import pytest

from ember_xla.machines.config import TargetError, builtin_configs, load_target, parse_target
from ember_xla.machines.npu import machine_of


def npu_data():
    return tomllib.loads((builtin_configs() / "npu.toml").read_text())


def test_npu_loads_with_its_parts():
    t = load_target("npu")
    assert t.cores == 8 and t.scratchpad_bytes == 512 * 1024 and t.npu is not None
    m = machine_of(t)
    assert m.latency == t.npu.dma.latency_ns * t.clock_ghz
    assert m.cores * m.core_bpc > m.global_bpc      # the per-core ports oversubscribe GM
    assert m.preload in ("model", "batch")


@pytest.mark.parametrize("name", ["tmu", "tiny"])
def test_dae_targets_unchanged_and_refused_as_npu(name):
    t = load_target(name)
    assert t.npu is None
    with pytest.raises(TargetError, match=r"\[dma\]: missing"):
        machine_of(t)


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.pop("dma"), r"\[dma\]: missing"),
    (lambda d: d["dma"].pop("outstanding"), r"dma\.outstanding: missing"),
    (lambda d: d["dma"].update(latency_ns=-5.0), r"dma\.latency_ns: expected a positive"),
    (lambda d: d["dma"].update(burst=3), r"dma\.burst: unknown key"),
    (lambda d: d["scratchpad"].update(preload="never"), r"scratchpad\.preload: expected one "
                                                         "of model, batch"),
    (lambda d: d["scratchpad"].pop("bytes_per_cycle"), r"scratchpad\.bytes_per_cycle: missing"),
    (lambda d: d["unified_buffer"].update(size_bytes="1"), r"unified_buffer\.size_bytes: "
                                                            "expected an integer"),
])
def test_bad_npu_descriptions(edit, match):
    d = npu_data()
    edit(d)
    with pytest.raises(TargetError, match=match) as e:
        parse_target(d, "my.toml")
    assert str(e.value).startswith("my.toml: ") and "\n" not in str(e.value)


def test_npu_keys_on_a_dae_target_are_unknown():
    d = tomllib.loads((builtin_configs() / "tmu.toml").read_text())
    d["scratchpad"]["latency_cycles"] = 3
    with pytest.raises(TargetError, match=r"scratchpad\.latency_cycles: unknown key"):
        parse_target(d, "x.toml")
