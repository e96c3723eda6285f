"""Each malformed-input failure through the real console script: one stderr line, exit code 2,
nothing written. Before the fixes these gave tracebacks (exit 1), multi-line usage, hangs or
MemoryError, or were accepted."""

import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parents[1] / "rewrites" / "fixtures"
GOOD = FIXTURES / "jax_gnn_segment_max.hlo"


def one_line(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember-xla: error: "), p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def module(tmp_path, body, name="m.hlo", extra=""):
    f = tmp_path / name
    f.write_text(f"HloModule m\n{extra}\nENTRY e {{\n{body}\n}}\n")
    return f


@pytest.mark.parametrize("op", ["add", "and"])
def test_wrong_operand_count(tmp_path, cli, op):
    ty = "pred" if op == "and" else "f32"
    f = module(tmp_path, f"  p = {ty}[2]{{0}} parameter(0)\n  ROOT q = {ty}[2]{{0}} {op}(p)")
    one_line(cli("inspect", str(f)), f"{f}:5:3:", "instruction q", f"{op} takes 2 operands")
    p = cli("rewrite", str(f), "--out", str(tmp_path / "o"))
    one_line(p, "instruction q")
    assert not (tmp_path / "o").exists()


def test_parameter_number_beyond_caller(tmp_path, cli):
    callee = ("\nf {\n  a = f32[2]{0} parameter(0)\n  b = f32[2]{0} parameter(11)\n"
              "  ROOT r = f32[2]{0} add(a, b)\n}\n")
    f = module(tmp_path, "  p = f32[2]{0} parameter(0)\n"
               "  ROOT q = f32[2]{0} call(p, p), to_apply=f", extra=callee)
    one_line(cli("rewrite", str(f), "--out", str(tmp_path / "o")), "instruction b",
             "parameter number 11", f"{f}:5:3")


@pytest.mark.parametrize("dim", ["-1", "9223372036854775808"])
def test_bad_dims(tmp_path, cli, dim):
    f = module(tmp_path, f"  p = s32[{dim}]{{0}} parameter(0)\n  ROOT q = s32[{dim}]{{0}} "
               "negate(p)")
    one_line(cli("inspect", str(f)), "instruction p", "outside [0, 2^63)")
    one_line(cli("rewrite", str(f), "--out", str(tmp_path / "o")))
    assert not (tmp_path / "o").exists()


def test_deeply_nested_tuple(tmp_path, cli):
    deep = "(" * 100 + "f32[]" + ")" * 100
    f = module(tmp_path, f"  ROOT p = {deep} parameter(0)")
    one_line(cli("inspect", str(f)), "nested more than")


def test_flipped_byte_proto(tmp_path, cli):
    """One flipped byte turns a layout field into a list: TypeError in `inspect` before."""
    from ember_xla.hlo.parser import parse_module
    from ember_xla.hlo_import.proto import module_to_proto

    data = bytearray(module_to_proto(parse_module(GOOD.read_text())))
    data[314] ^= 64
    f = tmp_path / "flip.pb"
    f.write_bytes(bytes(data))
    one_line(cli("inspect", str(f)), str(f))


@pytest.mark.parametrize("shape", ["f32[99999999999]", "f16[2147483648,4]"])
def test_huge_parameter_in_run(tmp_path, cli, shape):
    f = module(tmp_path, f"  ROOT p = {shape} parameter(0)")
    one_line(cli("run", str(f)), "EMBER_XLA_MAX_RUN_BYTES", "GiB")


def _npz():
    buf = io.BytesIO()
    np.savez(buf, np.ones((6, 4), np.float32), np.zeros(12, np.int32), np.zeros(12, np.int32))
    return buf.getvalue()


def _crc_corrupt(data: bytes) -> bytes:
    zf = zipfile.ZipFile(io.BytesIO(data))
    info = zf.infolist()[0]
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 80
    b = bytearray(data)
    b[start] ^= 0xFF
    return bytes(b)


@pytest.mark.parametrize("kind", ["truncated", "crc", "text"])
def test_bad_npz_inputs(tmp_path, cli, kind):
    data = _npz()
    bad = {"truncated": data[: len(data) // 2], "crc": _crc_corrupt(data),
           "text": b"just some text\n"}[kind]
    f = tmp_path / "x.npz"
    f.write_bytes(bad)
    line = one_line(cli("run", str(GOOD), "--inputs", str(f)), str(f))
    assert "pickled" not in line


def test_dev_zero_is_refused(cli):
    os.environ["EMBER_XLA_MAX_INPUT_BYTES"] = str(1 << 20)
    try:
        one_line(cli("inspect", "/dev/zero"), "/dev/zero", "character device")
    finally:
        del os.environ["EMBER_XLA_MAX_INPUT_BYTES"]


@pytest.mark.parametrize("args, needle", [
    ((), "no command"), (("frob", "x"), "unknown command"),
    (("inspect", "--frob", str(GOOD)), "frob"), (("run", "--repeat", "-1", str(GOOD)), "repeat"),
])
def test_usage_errors_are_one_line(cli, args, needle):
    one_line(cli(*args), needle)


def test_layout_rank_mismatch(tmp_path, cli):
    """Found by the fuzzer: a rank-1 table with a rank-2 layout crashed `rewrite`'s report."""
    text = (FIXTURES / "jax_gnn_segment_max.hlo").read_text()
    line = next(ln for ln in text.splitlines() if "parameter(0)" in ln and "{1,0}" in ln)
    dims = line.split("[", 1)[1].split("]", 1)[0]
    f = tmp_path / "lay.hlo"
    f.write_text(text.replace(line, line.replace(f"[{dims}]", f"[{dims.replace(',', '')}]")))
    one_line(cli("rewrite", str(f), "--out", str(tmp_path / "o")), "not a permutation")


def test_scatter_dims_out_of_range_in_run(tmp_path, cli):
    """Found by the 10,000-case fuzz run: a scatter_dims_to_operand_dims outside the operand's
    rank made `run`'s random-input builder raise IndexError (exit 70); it is XLA's to refuse."""
    src = (FIXTURES / "tf_gather_unsorted_segment_min.hlo").read_text()
    assert "scatter_dims_to_operand_dims={0}" in src
    f = tmp_path / "bad_scatter.hlo"
    f.write_text(src.replace("scatter_dims_to_operand_dims={0}",
                             "scatter_dims_to_operand_dims={-9}"))
    one_line(cli("run", str(f)), "scatter_dims_to_operand_dims")


def test_parameter_replication_leaf_count(tmp_path, cli):
    """Found by the fuzz run: XLA aborts (CHECK failure, signal 6) on a parameter_replication
    with more entries than the parameter has leaf buffers; the importer refuses it first."""
    f = module(tmp_path, "  p = f32[2]{0} parameter(0), parameter_replication={false,true}\n"
               "  ROOT q = f32[2]{0} negate(p)")
    one_line(cli("run", str(f)), "instruction p", "parameter_replication has 2 entries")


def test_literal_layout_not_a_permutation(tmp_path, cli):
    """Found by the fuzz run: a constant whose literal layout does not permute its dims made
    the text printer raise IndexError in `rewrite`; now a one-line error, nothing written."""
    from ember_xla.hlo.parser import parse_module
    from ember_xla.hlo_import.proto import module_to_proto

    f = module(tmp_path, "  c = s32[2,1]{1,0} constant({{1},{2}})\n"
               "  ROOT q = s32[2,1]{1,0} negate(c)")
    m = parse_module(f.read_text())
    for op in m.walk():
        if op.opcode == "constant":
            op.attributes["literal"]["shape"]["layout"]["minor_to_major"] = [33, 0]
    pb = tmp_path / "bad_literal.pb"
    pb.write_bytes(module_to_proto(m))
    one_line(cli("rewrite", str(pb), "--out", str(tmp_path / "o")), "does not permute")
    assert not (tmp_path / "o").exists()
