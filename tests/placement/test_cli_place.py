"""``ember-xla place`` from the real entry point: prints the plan per core (pieces, strategy,
predicted and emulated cycles), writes the PNG and the plan, reloads the plan; a bad plan or
workload file is one error line and exit code 2."""

import json

import numpy as np


def test_place_prints_plots_saves_and_reloads(cli, tmp_path, error_line):
    png, plan = tmp_path / "load.png", tmp_path / "plan.json"
    wl = tmp_path / "w.npz"
    rng = np.random.default_rng(0)
    arrays = {"rows": np.array([1000, 50, 7]), "dims": np.array([64, 32, 16])}
    for i, rows in enumerate(arrays["rows"]):
        lens = rng.integers(0, 6, 24)
        arrays[f"ids_{i}"] = rng.integers(0, rows, int(lens.sum()))
        arrays[f"offsets_{i}"] = np.concatenate([[0], np.cumsum(lens)])
    np.savez(wl, **arrays)
    p = cli("place", str(wl), f"--plot={png}", f"--save_plan={plan}")
    assert p.returncode == 0, p.stderr
    assert "placement auto on npu: makespan" in p.stdout and "core 7:" in p.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads(plan.read_text())
    assert saved["policy"] == "auto" and len(saved["tables"]) == 3
    q = cli("place", str(wl), f"--placement={plan}", "--json")
    assert q.returncode == 0, q.stderr
    report = json.loads(q.stdout)
    first = p.stdout.split("makespan ")[1].split(" cycles")[0].replace(",", "")
    assert round(report["makespan_cycles"]) == int(first)
    saved["pieces"][0]["core"] = 99
    plan.write_text(json.dumps(saved))
    assert "core 99 outside [0, 8)" in error_line(cli("place", str(wl), f"--placement={plan}"))
    arrays["ids_1"] = arrays["ids_1"].astype(np.float32)
    np.savez(wl, **arrays)
    assert "w.npz: ids_1: expected a 1-D integer array" in error_line(cli("place", str(wl)))
    np.savez(wl, rows=arrays["rows"], dims=arrays["dims"])
    assert "w.npz: ids_0: missing" in error_line(cli("place", str(wl)))
