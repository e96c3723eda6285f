"""``ember-xla emulate MODEL --target=tmu8`` from the real entry point: the clusters placed on
the 8 cores and emulated together (report per core and per piece, --trace with a track group
per core, --plot, --save_plan reloaded by --placement=FILE); flags that do not apply on DAE
cores are one-line errors (exit 2)."""

import json
from pathlib import Path

MODEL = str(Path(__file__).resolve().parents[1] / "cli" / "golden_outputs" / "models"
            / "jax_embedding_bag.hlo")


def test_emulate_on_tmu8_reports_traces_plots_and_reloads(cli, tmp_path):
    trace, png, plan = tmp_path / "t.json", tmp_path / "load.png", tmp_path / "plan.json"
    p = cli("emulate", MODEL, "--target=tmu8", f"--trace={trace}", f"--plot={png}",
            f"--save_plan={plan}")
    assert p.returncode == 0, p.stderr
    assert "auto placement on tmu8:" in p.stdout
    assert "timed from their addresses: their outputs are the native kernels'" in p.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["args"]["name"] for e in events if e["name"] == "process_name"} == {
        f"core {k}" for k in range(8)}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    q = cli("emulate", MODEL, "--target=tmu8", f"--placement={plan}", "--json")
    assert q.returncode == 0, q.stderr
    d = json.loads(q.stdout)
    assert d["cores"] == 8 and len(d["per_core"]) == 8 and d["verify"]["ok"]
    first = p.stdout.split("makespan ")[1].split(" cycles")[0].replace(",", "")
    assert round(d["makespan_cycles"]) == int(first)
    full = cli("emulate", MODEL, "--target=tmu8", f"--placement={plan}", "--engine=xla")
    assert full.returncode == 0, full.stderr
    assert "equal the native kernels bit for bit" in full.stderr
    assert f"makespan {int(first):,} cycles" in full.stdout  # the same timing


def test_flags_that_do_not_apply_on_dae_cores(cli, error_line):
    assert "--opt_level: on the cores of a DAE target" in error_line(
        cli("emulate", MODEL, "--target=tmu8", "-O2"))
    assert "--placement=nope: expected auto, symmetric, greedy or a plan file" in error_line(
        cli("emulate", MODEL, "--target=tmu8", "--placement=nope"))
