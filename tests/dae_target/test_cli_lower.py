"""``ember-xla lower`` / ``ember-xla opt`` through the installed console script (the ``cli``
fixture): every level printed and written, the written files parse back to the same text, and
each kind of bad input is one ``ember-xla: error:`` line with exit code 2 (never a traceback,
never a partial output). ~25 s (each call starts a Python process)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parents[1] / "golden" / "dae" / "Inputs"
EB_SUM = str(GOLDEN / "eb_sum.hlo")



def test_lower_prints_every_level_and_writes_files(cli, tmp_path):
    p = cli("lower", EB_SUM, "-O3")
    assert p.returncode == 0, p.stderr
    headers = [ln for ln in p.stdout.splitlines() if ln.startswith("// ----- cluster 0")]
    assert [h.split(", ")[1].split()[0] for h in headers] == ["SLC", "SLCV", "DLC"], headers
    assert p.stdout.count("\nmodule @") + p.stdout.startswith("module @") == 3
    out = tmp_path / "out"
    q = cli("lower", EB_SUM, "-O3", "--out", str(out))
    assert q.returncode == 0, q.stderr
    assert q.stdout == ""
    assert sorted(os.listdir(out)) == ["cluster0.dlc.mlir", "cluster0.slc.mlir",
                                       "cluster0.slcv.mlir", "lower.json"]
    rep = json.loads((out / "lower.json").read_text())
    (c,) = rep["clusters"]
    assert c["target"] == "ember.offsets_bag" and c["stages"][0]["after"] == "lower-to-slc"
    assert [s["level"] for s in c["stages"]][-1] == "DLC"
    # what was printed is what was written
    for level in ("slc", "slcv", "dlc"):
        assert (out / f"cluster0.{level}.mlir").read_text() in p.stdout
    # every written level parses, verifies and prints back to the same text
    for level in ("slc", "slcv", "dlc"):
        f = out / f"cluster0.{level}.mlir"
        r = cli("opt", str(f))
        assert r.returncode == 0, r.stderr
        assert r.stdout == f.read_text()


def test_print_after_all_and_opt_pipeline(cli, tmp_path):
    p = cli("lower", EB_SUM, "--pipeline=vectorize{vl=4},bufferize", "--print-after-all",
            "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    names = sorted(os.listdir(tmp_path / "o"))
    assert names == ["cluster0.00.lower-to-slc.mlir", "cluster0.01.vectorize.mlir",
                     "cluster0.02.bufferize.mlir", "lower.json"], names
    # opt runs the same passes on the SLC text and gets the same result
    slc = tmp_path / "o" / "cluster0.00.lower-to-slc.mlir"
    r = cli("opt", str(slc), "--pipeline=vectorize{vl=4},bufferize")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (tmp_path / "o" / "cluster0.02.bufferize.mlir").read_text()
    r = cli("opt", str(slc), "--pipeline=vectorize{vl=4}", "--print-after-all")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("// -----// IR Dump After vectorize{vl=4} //----- //\n")
    assert "// vectorize{vl=4}: 2 change(s)" in r.stdout  # the row loop and the fill loop
    assert "//   scf.for in a callback -> chunks of 4" in r.stdout


@pytest.mark.parametrize("args, expect", [
    (["--pipeline=vectorize{vl=8"], "unbalanced '{'"),
    (["--pipeline=frobnicate"], "unknown pass 'frobnicate'"),
    (["--pipeline=vectorize{lanes=8}"], "unknown option 'lanes'"),
    (["--pipeline=vectorize{vl=eight}"], "option vl expects int"),
    (["-O7"], "unknown optimization level -O7"),
    (["-O3", "--pipeline=bufferize"], "either -O<n> or --pipeline"),
    (["--cluster", "3"], "has 1 ember clusters"),
])
def test_lower_bad_flags(cli, args, expect, tmp_path, error_line):
    out = tmp_path / "out"
    line = error_line(cli("lower", EB_SUM, *args, "--out", str(out)))
    assert expect in line, line
    assert not out.exists()  # nothing written


def test_lower_bad_model(cli, tmp_path, error_line):
    bad = tmp_path / "bad.hlo"
    bad.write_text(Path(EB_SUM).read_text().replace("custom-call(", "custom-call(table.1, ", 1)
                   .replace("parameter(2)", "parameter(2", 1))
    line = error_line(cli("lower", str(bad)))
    assert str(bad) in line


SLC_TEXT = """\
module @m attributes {entry = @f} {
  func @f(%a: memref<?xf32>, %out: memref<?xf32>) {
    %c0 = "arith.constant"() {value = 0} : () -> index
    %x = "memref.load"(%a, %c0) : (memref<?xf32>, index) -> f32
    "memref.store"(%x, %out, %c0) : (f32, memref<?xf32>, index) -> ()
    "func.return"() : () -> ()
  }
}
"""


@pytest.mark.parametrize("text, expect", [
    (SLC_TEXT.replace("(%a, %c0)", "(%a, %c9)"), ":4:28: %c9 is not defined here"),
    (SLC_TEXT.replace('"func.return"() : () -> ()\n', ""), "does not end in a terminator"),
    (SLC_TEXT.replace("-> f32", "-> f32 junk"), ":4:"),
    (SLC_TEXT.replace('"arith.constant"() {value = 0}', '"arith.constant"()'), "value"),
])
def test_opt_bad_ir(cli, tmp_path, text, expect, error_line):
    f = tmp_path / "in.mlir"
    f.write_text(text)
    line = error_line(cli("opt", str(f), "--out", str(tmp_path / "res.mlir")))
    assert str(f) in line and expect in line, line
    assert not (tmp_path / "res.mlir").exists()


def test_opt_fixed_point_and_missing_file(cli, tmp_path, error_line):
    f = tmp_path / "in.mlir"
    f.write_text(SLC_TEXT)
    r = cli("opt", str(f), "--out", str(tmp_path / "res.mlir"))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert (tmp_path / "res.mlir").read_text() == SLC_TEXT
    line = error_line(cli("opt", str(tmp_path / "nope.mlir")))
    assert "nope.mlir: cannot read" in line
