"""One job over 51 good models (JAX and TF; .pb, .hlo/.txt, SavedModels) and 7 bad ones
(truncated, random bytes, empty, bad syntax, SavedModel without signatures, a text file too
big to import within the timeout, a worker crash): every good model done, every bad one
reported with a one-line reason, exit code 1; a rerun keeps every finished model. A model past
the memory limit is killed and reported, and the next model still runs. Cost: ~1-2 min."""

import csv
import json
import os


def _rows(out):
    with open(out / "summary.csv") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def test_every_good_model_done_every_bad_one_reported(fleet_run, fleet, kit):
    p, out, elapsed = fleet_run
    print(f"fleet job: {elapsed:.1f} s; exit {p.returncode}")
    assert p.returncode == 1, p.stderr[-3000:]
    assert "Traceback" not in p.stdout + p.stderr
    rows = _rows(out)
    assert len(fleet[1]) >= 50 and len(rows) == len(fleet[1]) + len(kit.BAD)
    good = {os.path.basename(x): x for x in fleet[1]}
    for key, r in rows.items():
        if key in good:
            assert r["status"] == "ok", (key, r["error"])
            assert r["verify"] in ("bitwise", "close") and r["error"] == ""
            rep = json.loads((out / "models" / key / "report.json").read_text())
            # a SavedModel's variables travel in params.npz (bound parameters)
            bound = any(e["bound"] for e in rep.get("parameters", []))
            # a SavedModel's signature output names travel in outputs.json
            named = os.path.isdir(good[key])
            assert sorted(os.listdir(out / "models" / key)) == [
                *(["outputs.json"] if named else []), *(["params.npz"] if bound else []),
                "report.json", "rewritten.hlo", "rewritten.pb"]
            if named:
                names = json.loads((out / "models" / key / "outputs.json").read_text())
                assert names and all(isinstance(n, str) for n in names), names
            assert len(rep["clusters"]) == int(r["clusters"])
        else:
            want = kit.BAD[key]
            assert r["status"] == "failed" and want in r["error"], (key, r["error"])
            assert "\n" not in r["error"] and len(r["error"]) < 400
            assert not (out / "models" / key).exists()
    # the idioms were found: two clusters where the model has two tables, none in the MLPs
    assert all(r["clusters"] == "2" for k, r in rows.items() if "_two_" in k)
    assert all(r["clusters"] == "0" for k, r in rows.items() if "_mlp_" in k)
    assert sum(int(r["clusters"] or 0) for r in rows.values()) >= 45
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["ok"] == len(good) and summary["totals"]["failed"] == len(kit.BAD)
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "summary.txt").read_text()
    assert f"{len(rows)} models: {len(good)} ok, {len(kit.BAD)} failed" in text
    assert text in p.stdout + "\n"
    entries = os.listdir(out / "manifest")
    assert len(entries) == len(rows)
    assert p.stderr.count("batch: [") == len(rows)  # a log line per model (not a terminal)


def test_rerun_keeps_finished_models(fleet_run, fleet, kit):
    _, out, _ = fleet_run
    before = {f: (out / "manifest" / f).read_text() for f in os.listdir(out / "manifest")}
    p = kit.run(f"--inputs={fleet[0]}/*", f"--out={out}", "--workers=2",
                "--actions=rewrite,verify", "--progress=log")
    assert p.returncode == 0, p.stderr[-2000:]
    n = len(fleet[1])
    assert f"batch: {n} models; {n} done before (kept), 0 to run" in p.stdout
    after = {f: (out / "manifest" / f).read_text() for f in os.listdir(out / "manifest")}
    assert after == before  # not one entry rewritten


def test_a_model_past_the_memory_limit_is_killed_and_the_batch_goes_on(oom_model, fleet,
                                                                       tmp_path, kit):
    out = tmp_path / "out"
    good = f"{fleet[0]}/jax_000_segsum_64x8.pb"
    p = kit.run(f"--inputs={oom_model},{good}", f"--out={out}", f"--memory_mb={kit.MEMORY_MB}",
                "--timeout_s=300", "--workers=1", "--progress=log")
    assert p.returncode == 1, p.stderr[-2000:]
    rows = _rows(out)
    assert list(rows) == ["big_output.hlo", "jax_000_segsum_64x8.pb"]  # the big one first
    err = rows["big_output.hlo"]["error"]
    assert rows["big_output.hlo"]["status"] == "failed" and err.startswith("out of memory: "), err
    assert f"(> --memory_mb={kit.MEMORY_MB}); worker killed" in err
    assert rows["jax_000_segsum_64x8.pb"]["status"] == "ok"
