"""``--verify`` fails loudly: a rewritten module whose outputs differ from the original's
(here: a wrong kernel result injected through the test-only ``EMBER_XLA_TEST_WRONG_RESULT``
switch of the native reductions) makes ``rewrite`` exit 1 with one line naming the output, the
difference and where it is, and write nothing (a previous result in ``--out`` is kept); ``batch``
fails the model the same way. Without the switch the same commands pass, so the failure is the
injected fault's."""

import json
import os

import numpy as np
import pytest

WRONG = {"EMBER_XLA_TEST_WRONG_RESULT": "1"}
#: the kernel's first result element one ulp off: within the model-level tolerance
ONE_ULP = {"EMBER_XLA_TEST_WRONG_RESULT": "ulp"}


@pytest.fixture(scope="module")
def bag_model(tmp_path_factory):
    import jax
    import jax.numpy as jnp

    def f(t, i, s):
        return jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=8)

    d = tmp_path_factory.mktemp("bag")
    lo = jax.jit(f).lower(np.ones((100, 16), np.float32), np.zeros(40, np.int32),
                          np.zeros(40, np.int32))
    (d / "m.pb").write_bytes(lo.compiler_ir("hlo").as_serialized_hlo_module_proto())
    return d / "m.pb"


def test_rewrite_verify_passes_without_the_fault(bag_model, tmp_path, cli):
    out = tmp_path / "out"
    p = cli("rewrite", str(bag_model), "--out", str(out), "--verify", "--rewrite_all")
    assert p.returncode == 0, p.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["clusters"] and rep["verify"]["bitwise_equal"] is True


def test_rewrite_verify_mismatch_exits_1_and_writes_nothing(bag_model, tmp_path, cli):
    out = tmp_path / "new"
    p = cli("rewrite", str(bag_model), "--out", str(out), "--verify", "--rewrite_all",
            extra_env=WRONG)
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    line = lines[0]
    assert line.startswith("ember-xla: error: ") and str(bag_model) in line
    assert "output 0 differs" in line and "at index [0, 0]" in line and "nothing written" in line
    assert "miscompiles" not in line  # a wrong kernel is the rewrite's fault, not XLA's
    assert "> --verify_atol=0.0001 + --verify_rtol=1e-05 x |original|)" in line
    assert not out.exists()
    assert not [n for n in os.listdir(tmp_path) if "ember-new" in n]


def test_rewrite_verify_checks_every_cluster_against_xla(bag_model, tmp_path, cli):
    out = tmp_path / "out"
    p = cli("rewrite", str(bag_model), "--out", str(out), "--verify", "--rewrite_all")
    assert p.returncode == 0, p.stderr
    check = json.loads((out / "report.json").read_text())["verify"]["clusters"]
    assert check["exact"] is True and check["unchecked"] == []
    (call,) = check["calls"]
    assert call["target"] == "ember.segment_reduce" and call["exact"] and call["bitwise_equal"]
    assert "each ember call equals XLA:CPU on its cluster's operands in the model (1 checked)" \
        in p.stdout


@pytest.mark.parametrize("command", ["rewrite", "batch"])
def test_verify_one_ulp_off_cluster_fails(bag_model, tmp_path, cli, command):
    """A kernel result one ulp from XLA's passes the model-level tolerance; the per-cluster
    check (the custom-call against its outlined computation, on the model's operands) fails
    it: exit 1, one line naming the call, the difference and where, nothing written."""
    out = tmp_path / "out"
    if command == "rewrite":
        p = cli("rewrite", str(bag_model), "--out", str(out), "--verify", "--rewrite_all",
                extra_env=ONE_ULP)
        assert p.returncode == 1, (p.stdout[-2000:], p.stderr)
        (line,) = p.stderr.strip().splitlines()
        assert "outputs bitwise equal: False" in p.stdout  # within the model tolerance
        assert not out.exists()
    else:
        p = cli("batch", f"--inputs={bag_model}", f"--out={out}", "--actions=rewrite,verify",
                "--workers=1", extra_env={**ONE_ULP, "EMBER_XLA_COST_MODEL": "off"})
        assert p.returncode == 1, (p.stdout[-2000:], p.stderr[-2000:])
        line = (out / "summary.json").read_text()
    assert ("cluster ember_segment_reduce (ember.segment_reduce) differs from its outlined "
            "computation on XLA:CPU by ") in line
    assert "at index [0, 0]" in line and "nothing written" in line


def test_rewrite_verify_mismatch_keeps_the_previous_result(bag_model, tmp_path, cli):
    out = tmp_path / "out"
    assert cli("rewrite", str(bag_model), "--out", str(out), "--rewrite_all").returncode == 0
    before = {n: (out / n).read_bytes() for n in sorted(os.listdir(out))}
    p = cli("rewrite", str(bag_model), "--out", str(out), "--verify", "--rewrite_all",
            extra_env=WRONG)
    assert p.returncode == 1, p.stderr
    assert {n: (out / n).read_bytes() for n in sorted(os.listdir(out))} == before


def test_rewrite_without_verify_does_not_check(bag_model, tmp_path, cli):
    """The switch only corrupts results: without --verify nothing runs, so nothing fails."""
    p = cli("rewrite", str(bag_model), "--out", str(tmp_path / "o"), "--rewrite_all",
            extra_env=WRONG)
    assert p.returncode == 0, p.stderr


def test_batch_verify_mismatch_fails_the_model(bag_model, tmp_path, cli):
    out = tmp_path / "job"
    p = cli("batch", f"--inputs={bag_model}", f"--out={out}", "--actions=rewrite,verify",
            "--workers=1", extra_env={**WRONG, "EMBER_XLA_COST_MODEL": "off"})
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr[-2000:])
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["models"] if isinstance(summary, dict) and "models" in summary else summary
    text = json.dumps(rows)
    assert "failed" in text and "output 0 differs" in text


def test_emulate_passes_without_the_fault(bag_model, tmp_path, cli):
    trace = tmp_path / "t.json"
    p = cli("emulate", str(bag_model), "--json", f"--trace={trace}", "--engine=xla")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    checks = rep["verify"]["clusters_vs_native"]
    assert checks and all(c["bitwise_equal"] and c["cpp_cycles_equal"] for c in checks)
    assert "equal the native kernels bit for bit" in p.stderr and trace.exists()
    # the default (fast) engine: the same cycles, checked against the Python reference too
    q = cli("emulate", str(bag_model), "--json", f"--trace={trace}")
    assert q.returncode == 0, q.stderr
    fast = json.loads(q.stdout)
    native = fast["verify"]["clusters_outputs_native"]
    assert native and all(c["cpp_cycles_equal"] for c in native)
    assert [c["cycles"] for c in fast["clusters"]] == [c["cycles"] for c in rep["clusters"]]


@pytest.mark.parametrize("engine", ["xla", "python"])
def test_emulate_cluster_mismatch_exits_1_and_writes_nothing(bag_model, tmp_path, cli, engine):
    """The injected fault is in the native kernel, not in the emulator: the per-cluster
    bit-for-bit check of the emulated results against the native kernel's fails, naming the
    output and the index. With the xla engine the model's outputs are the emulated cluster's
    (they still equal the original's); the python engine's are the native kernel's, so the
    model-level check (``--verify_atol``) fails too."""
    trace = tmp_path / "t.json"
    p = cli("emulate", str(bag_model), f"--engine={engine}", f"--trace={trace}",
            extra_env=WRONG)
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr)
    assert p.stdout == "" and not trace.exists()
    bad = [ln for ln in p.stderr.splitlines() if "MISMATCH" in ln]
    model = [ln for ln in bad if ln.startswith("verify: original vs")]
    assert len(model) == (engine == "python"), p.stderr
    if model:
        assert ("output 0 differs from the original's by inf at index [0, 0] "
                "(the original's ") in model[0]
        assert "> --verify_atol=0.0001 + --verify_rtol=1e-05 x |original|)" in model[0]
    bad = [ln for ln in bad if ln not in model]
    assert len(bad) == 1, p.stderr
    assert bad[0].startswith("verify: cluster 0 (%")
    assert "emulated output 0 differs from the native kernel's by inf at index [0, 0]" in bad[0]
    assert "bit for bit expected" in bad[0]
    assert p.stderr.strip().splitlines()[-1] == "emulate: verification FAILED: nothing written"


def test_emulate_on_cores_mismatch_exits_1_and_writes_nothing(bag_model, tmp_path, cli):
    """On the cores of tmu8 an emulated program that differs from its native kernel fails the
    run (exit 1, one line naming the variant, output and index), not a dropped variant or a
    fallback to the native kernel, even with --native_fallback (the full engine: the fast one
    computes no emulated values; its model check fails instead, below)."""
    plan, plot = tmp_path / "plan.json", tmp_path / "load.png"
    ok = cli("emulate", str(bag_model), "--target=tmu8", "--placement=auto")
    assert ok.returncode == 0, ok.stderr
    p = cli("emulate", str(bag_model), "--target=tmu8", "--placement=auto", "--native_fallback",
            f"--save_plan={plan}", f"--plot={plot}", "--engine=xla", extra_env=WRONG)
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr)
    assert p.stdout == "" and not plan.exists() and not plot.exists()
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("ember-xla: error: emulate: cluster %"), line
    assert "program's output 0 differs from the native kernel's by inf at index [0, 0]" in line
    assert line.endswith("(bit for bit expected); nothing written")
    q = cli("emulate", str(bag_model), "--target=tmu8", "--placement=auto",
            f"--save_plan={plan}", extra_env=WRONG)
    assert q.returncode == 1 and q.stdout == "" and not plan.exists(), q.stderr
    assert "MISMATCH" in q.stderr
    assert q.stderr.strip().splitlines()[-1] == "emulate: verification FAILED: nothing written"
