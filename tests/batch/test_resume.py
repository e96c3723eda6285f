"""``kill -9`` of a batch job mid-run, then a rerun: finished models are not redone (counted
from the manifest), nothing in the output folder is partial, and the rerun completes the job.
Cost: ~30-40 s."""

import json
import os
import signal
import time

from ember_xla.batch import manifest
from ember_xla.util.atomic import TEMP_MARK


def _complete(folder):
    names = sorted(os.listdir(folder))
    if names != ["report.json", "rewritten.hlo", "rewritten.pb"]:
        return False
    json.loads((folder / "report.json").read_text())  # parses: not cut short
    return (folder / "rewritten.hlo").read_text().rstrip().endswith("}")


def test_kill_9_then_rerun(fleet, tmp_path, kit):
    out = tmp_path / "out"
    args = [f"--inputs={fleet[0]}/jax_*", f"--out={out}", "--workers=1",
            "--actions=rewrite,verify", "--progress=log"]
    total = len([p for p in fleet[1] if os.path.basename(p).startswith("jax_")])
    proc = kit.popen(*args)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        done = os.listdir(out / "manifest") if (out / "manifest").exists() else []
        if len([n for n in done if n.endswith(".json") and not n.startswith(".")]) >= 8:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the job ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    time.sleep(0.5)  # the worker follows its parent (PR_SET_PDEATHSIG)

    entries = {}
    for name in os.listdir(out / "manifest"):
        if name.startswith(".") and TEMP_MARK in name:
            continue  # an atomic write's temp file, cut short by the kill: never read as an entry
        assert name.endswith(".json"), name
        e = json.loads((out / "manifest" / name).read_text())
        entries[e["key"]] = e
    finished = {k for k, e in entries.items() if e["status"] == "ok"}
    assert 8 <= len(finished) < total
    for key in os.listdir(out / "models"):
        assert _complete(out / "models" / key), key  # whole or absent, never partial
    for key in finished:
        assert manifest.hash_tree(str(out / "models" / key)) == entries[key]["files"]

    p = kit.run(*args)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (f"batch: {total} models; {len(finished)} done before (kept), "
            f"{total - len(finished)} to run") in p.stdout
    assert p.stderr.count("batch: [") == total - len(finished)
    run_ids = {}
    for name in os.listdir(out / "manifest"):
        if name.startswith("."):
            continue  # the killed run's temp file (above)
        e = json.loads((out / "manifest" / name).read_text())
        run_ids[e["key"]] = e["run_id"]
        assert e["status"] == "ok"
    assert len(run_ids) == total
    for key in finished:  # untouched by the rerun
        assert run_ids[key] == entries[key]["run_id"]
    assert len(set(run_ids.values())) == 2
    assert sorted(os.listdir(out / "models")) == sorted(run_ids)
    assert all(_complete(out / "models" / k) for k in run_ids)
    assert not os.listdir(out / manifest.STAGING)
