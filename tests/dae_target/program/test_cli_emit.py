"""``ember-xla lower --emit=program`` through the installed console script: prints the DAE
program of each cluster, writes its text form with ``--out`` (which reads back to the program
emitted in-process), and says why a pipeline that stops above DLC has none. ~10 s."""

from __future__ import annotations

import json
from pathlib import Path

from ember_xla.dae import from_text

EB_SUM = str(Path(__file__).parents[2] / "golden" / "dae" / "Inputs" / "eb_sum.hlo")


def test_emit_program_prints_and_writes(cli, tmp_path):
    p = cli("lower", EB_SUM, "-O3", "--emit=program")
    assert p.returncode == 0, p.stderr
    assert "DAE program -----" in p.stdout and "dae program offsets_bag" in p.stdout
    assert "on tu2.end: buffer" in p.stdout and "module @" not in p.stdout
    out = tmp_path / "out"
    q = cli("lower", EB_SUM, "-O0", "--emit=program", "--out", str(out))
    assert q.returncode == 0, q.stderr
    prog = from_text((out / "cluster0.dae").read_text())
    assert prog.kind == "offsets_bag" and prog.args[0].shape == (100, 16)
    assert json.loads((out / "lower.json").read_text())["clusters"][0]["program"] == \
        "cluster0.dae"
    r = cli("lower", EB_SUM, "--pipeline=vectorize", "--emit=program")
    assert r.returncode == 0 and "no DAE program: the pipeline ends at SLCV" in r.stderr
