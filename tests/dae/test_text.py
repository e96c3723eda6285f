"""The text form of DAE programs: the hand-written bag prints exactly as its golden file, every
cluster kind at -O0..-O4 round-trips exactly (multi-line and one-line form, which is plain
ASCII without quotes for backend_config), and malformed text is one ProgramError naming the
record. ~3 s."""

from __future__ import annotations

from pathlib import Path

import pytest
from pass_cases import CASES, lowered

from ember_xla.dae import DaeProgram, ProgramError, from_text, print_program, to_text
from ember_xla.dae_target.handwritten import sum_bag_dlc
from ember_xla.dae_target.passes.levels import lower_cluster
from ember_xla.dae_target.program import emit_program

GOLDEN = Path(__file__).parents[1] / "golden" / "dae" / "eb_handwritten.dae"


def test_handwritten_program_prints_as_golden():
    p = emit_program(sum_bag_dlc())
    assert to_text(p) == GOLDEN.read_text()
    assert from_text(GOLDEN.read_text()) == p
    assert p.version == 1 and len(p.engines) == 1 and len(p.engines[0].tus) == 3
    assert [t.vl for t in p.engines[0].tus] == [0, 0, 8]
    assert str(p) == print_program(p) and "on tu2.end: buffer" in str(p)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_level_round_trips(case):
    _, spec = lowered(case)
    for level in range(5):
        p = emit_program(lower_cluster(spec, level)[-1][1], [a.shape for a in spec.operands])
        text = to_text(p)
        assert from_text(text) == p
        assert to_text(from_text(text)) == text
        line = to_text(p, one_line=True)
        assert "\n" not in line and '"' not in line and "\\" not in line and line.isascii()
        assert from_text(line) == p


def test_float_immediates_round_trip_exactly():
    p = emit_program(sum_bag_dlc())
    code = list(p.code)
    consts = [i for i, ins in enumerate(code) if ins.op == "const" and
              isinstance(ins.imm[0], float)]
    for value in (float("nan"), float("-inf"), -0.0, 1e-45, 0.1, 3.4028234663852886e38):
        k = consts[0]
        code[k] = type(code[k])(code[k].op, code[k].dst, code[k].src, (value,))
        q = DaeProgram(p.name, p.kind, p.num_inputs, p.args, p.regs, p.engines, tuple(code))
        back = from_text(to_text(q))
        assert back == q and repr(back.code[k].imm[0]) == repr(value)
    assert q != p


def _broken(edit) -> str:
    lines = GOLDEN.read_text().splitlines()
    return "\n".join(edit(lines)) + "\n"


@pytest.mark.parametrize("edit,message", [
    (lambda ls: ["ember-dae 2"] + ls[1:], "unsupported DAE program version '2'"),
    (lambda ls: ls[:-1], "ends early"),
    (lambda ls: ls + ["end"], "records after 'end'"),
    (lambda ls: [ln.replace("reg 3 m f32 2", "reg 3 m f33 2") for ln in ls], "'f33'"),
    (lambda ls: [ln.replace("tu 1 0 4 6 2 0", "tu 1 0 4 6 2") for ln in ls],
     "'tu' record has 6 fields, expected 7"),
    (lambda ls: [ln.replace("on 0 iter token 2", "on 0 later token 2") for ln in ls],
     "'later' (expected one of begin, iter, end)"),
    (lambda ls: [ln.replace("addf 1 2 0", "addf 1 1 0") for ln in ls], "field counts"),
    (lambda ls: [ln.replace("case 2 1", "case 2 0") for ln in ls],
     "expected 'code', got 'inc'"),
    (lambda ls: [ln.replace("for 1 3 1 17 4 9 6 5", "for 1 3 1 17 4 9 6 9") for ln in ls],
     "runs past its list"),
    (lambda ls: [ln.replace("subi 1 2 0", "frob 1 2 0") for ln in ls], "unknown instruction"),
    (lambda ls: [ln.replace("inc 1 0 0 11", "inc 1 0 0 99") for ln in ls],
     "engine 0 case 2 instruction 0 (inc): register out of range (the program has 22)"),
    (lambda ls: [ln.replace("on 0 iter token 2", "on 0 iter token 7") for ln in ls],
     "engine 0: control token 7 has no case"),
    (lambda ls: [ln.replace("tu 1 0 4 6 2 0", "tu 1 2 4 6 2 0") for ln in ls],
     "engine 0 tu 1: parent 2 must be an earlier tu or -1"),
    (lambda ls: [ln.replace("run 0 0 1 0", "run 0 0 1 3") for ln in ls],
     "no engine 3 to run here"),
])
def test_malformed_text_is_one_error(edit, message):
    with pytest.raises(ProgramError) as e:
        from_text(_broken(edit))
    assert message in str(e.value) and "\n" not in str(e.value)


def _with_init(init: str) -> str:
    """The hand-written bag with its output declared to start as input ``init``'s contents."""
    lines = GOLDEN.read_text().splitlines()
    at = max(i for i, ln in enumerate(lines) if ln.startswith("arg "))
    return "\n".join(lines[:at + 1] + [f"init {lines[at].split()[1]} {init}"]
                     + lines[at + 1:]) + "\n"


def test_output_updated_in_place_round_trips():
    """An output that starts as an input (a fused optimizer's table updated in place) is an
    ``init`` record after its ``arg``; it survives both text forms and is printed."""
    text = _with_init("2")
    p = from_text(text)
    out = p.args[-1]
    assert out.role == "out" and out.init == 2 and all(a.init == -1 for a in p.args[:-1])
    assert to_text(p) == text and from_text(to_text(p, one_line=True)) == p
    assert "(starts as table: updated in place)" in print_program(p)


@pytest.mark.parametrize("init,message", [
    ("0", "starts as a copy of argument 0, which is not an input of its type and shape"),
    ("3", "starts as a copy of argument 3, which is not an input of its type and shape"),
])
def test_bad_in_place_output_is_one_error(init, message):
    with pytest.raises(ProgramError) as e:
        from_text(_with_init(init))
    assert message in str(e.value) and "\n" not in str(e.value)
