"""The resource binder: the shipped TMU target takes every cluster kind at every level; each
way a program can fail to fit (layers, lanes, broadcast, lockstep, vector width, a row buffer
or one callback's operands bigger than the data queue) is refused with one line naming the
target key; sizes only known at run time are refused by the timing model with the same
exception. ~2 s."""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest
from pass_cases import CASES, lowered
from slc_examples import bag_inputs

from ember_xla.dae import bind_program
from ember_xla.dae.errors import ProgramDoesNotFit
from ember_xla.dae.model import TU
from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.passes.levels import lower_cluster
from ember_xla.dae_target.program import emit_cluster, emit_program
from ember_xla.emulator.reference import emulate
from ember_xla.machines.config import builtin_configs, load_target, parse_target

SHAPES = [(5,), (10,), (100, 64)]


def tiny(**access):
    data = tomllib.loads((builtin_configs() / "tiny.toml").read_text())
    data["access_unit"].update(access)
    return parse_target(data, "tiny-variant")


def bag(vl=4, dim=16):
    return emit_program(sum_bag_dlc(vl=vl), [(5,), (10,), (100, dim)], [(4, dim)])


@pytest.mark.parametrize("case", sorted(CASES))
def test_tmu_takes_every_cluster(case):
    _, spec = lowered(case)
    tmu = load_target("tmu")
    for level in range(5):
        p = emit_cluster(spec, level)
        b = bind_program(p, tmu)
        assert 1 <= b.layers_used <= tmu.access.layers
        assert [len(e) for e in b.slots] == [len(e.tus) for e in p.engines]


def test_slots_are_layer_and_lane():
    b = bind_program(bag(), load_target("tiny"))
    assert b.slots == (((0, 0), (1, 0), (2, 0)),) and "layer 2 lane 0" in str(b)


def refusal(program, target) -> str:
    with pytest.raises(ProgramDoesNotFit) as e:
        bind_program(program, target)
    msg = str(e.value)
    assert "\n" not in msg and " does not fit tiny" in msg
    return msg


def test_too_many_layers():
    assert "nests 3 traversal units, the access unit has 2 layers (access_unit.layers)" in \
        refusal(bag(), tiny(layers=2))


def test_vector_wider_than_the_execute_unit():
    msg = refusal(bag(vl=8), load_target("tiny"))
    assert "vector<8xf32> (256 bits)" in msg and "execute_unit.vector_bits" in msg


def test_row_buffer_bigger_than_the_queue():
    msg = refusal(bag(dim=64), load_target("tiny"))
    assert "entry of 256 bytes (a row buffer) exceeds the 128-byte data queue" in msg


def test_operands_of_one_callback_bigger_than_the_queue():
    _, spec = lowered("offsets_mean_bf16_weighted")
    p = emit_program(lower_cluster(spec, 0)[-1][1], [a.shape for a in spec.operands])
    # O0 pushes row, column, element (bf16) and weight (f32) per element: 8 + 8 + 2 + 4 bytes
    assert "callback 1 of engine 0 pops 22 bytes, more than the 16-byte data queue" in \
        refusal(p, tiny(data_queue_bytes=8))
    bind_program(p, tiny(data_queue_bytes=12))


def _with_sibling(p):
    """A second nested TU under the root (two lanes in layer 1, a broadcast of layer 0)."""
    e = p.engines[0]
    extra = dataclasses.replace(e.tus[1])
    return dataclasses.replace(p, engines=(dataclasses.replace(e, tus=e.tus + (extra,)),))


def test_lanes_broadcast_and_lockstep():
    p = _with_sibling(bag())
    assert bind_program(p, load_target("tiny")).slots[0][3] == (1, 1)
    assert "2 traversal units in layer 1, the access unit has 1 lanes" in \
        refusal(p, tiny(lanes=1, data_queue_bytes=128))
    assert "feeds 2 nested units" in refusal(p, tiny(broadcast=False))
    assert "no lockstep lanes (access_unit.lockstep)" in refusal(bag(), tiny(lockstep=False))
    assert isinstance(p.engines[0].tus[3], TU)


def test_sizes_known_only_at_run_time_are_refused_by_the_timing_model():
    p = emit_program(sum_bag_dlc(vl=4))  # no shapes: the row length is unknown statically
    bind_program(p, load_target("tiny"))
    inputs = bag_inputs(np.random.default_rng(0), [2, 1], 10, 64)
    with pytest.raises(ProgramDoesNotFit, match="entry of 256 bytes does not fit the 128-byte"):
        emulate(p, inputs, load_target("tiny"), output_shapes=[(2, 64)])
