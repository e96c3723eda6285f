"""The same job on the local runner and on Apache Beam's DirectRunner gives identical
summaries (rows, totals, exit code). Skipped, with the reason printed, where Beam is not
installed (pip install '.[beam]'). Cost: ~20-40 s."""

import json

import pytest


def _beam_or_skip():
    try:
        import apache_beam  # noqa: F401
    except ImportError as e:
        reason = f"Apache Beam is not installed ({e}); pip install '.[beam]' to run this test"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)


def test_local_and_beam_direct_runner_give_identical_summaries(fleet, bad_models, tmp_path,
                                                               kit):
    _beam_or_skip()
    d = fleet[0]
    # no SavedModel: workers then start without TensorFlow (the worker code is the same)
    inputs = (f"--inputs={d}/jax_00[0-5]*,{d}/tf_00[0-1]*,"
              f"{bad_models}/bad_truncated.pb,{bad_models}/bad_syntax.hlo,"
              f"{bad_models}/bad_random.pb")
    procs, docs = {}, {}
    for runner in ("local", "beam"):
        out = tmp_path / runner
        procs[runner] = p = kit.run(inputs, f"--out={out}", f"--runner={runner}", "--workers=2",
                                    "--actions=rewrite,verify", "--progress=log")
        assert "Traceback" not in p.stdout + p.stderr, p.stderr[-3000:]
        docs[runner] = (out / "summary.csv").read_text(), json.loads(
            (out / "summary.json").read_text())
    assert procs["local"].returncode == procs["beam"].returncode == 1
    csv_local, json_local = docs["local"]
    csv_beam, json_beam = docs["beam"]
    assert csv_local == csv_beam
    assert json_local["models"] == json_beam["models"]
    assert json_local["totals"] == json_beam["totals"]
    assert json_local["totals"]["models"] == 6 * 2 + 2 * 2 + 3
    assert json_local["totals"]["failed"] == 3
    assert json_beam["run"]["runner"] == "beam"
    assert procs["beam"].stderr.count("batch: [") == json_local["totals"]["models"]
