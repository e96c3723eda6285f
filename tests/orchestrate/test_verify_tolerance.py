"""The one verdict rule of a model-level verification (``runtime.compare``: bit for bit, or
every element within ``--verify_atol + --verify_rtol x |original|``) on a flax model whose
embedding cluster is emulated bit-exactly but whose dense layers round differently around the
rewritten call (XLA:CPU fuses them otherwise): ``emulate`` on one core and on the cores of
tmu8 passes by the rule, ``rewrite --verify`` judges it the same way, and with the relative
part off (``--verify_rtol=0``) each fails with exit 1, one line naming the output and the
index, and writes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ember_xla.machines.config import load_target
from ember_xla.orchestrate.emulate_model import EmulateOptions, emulate_module
from ember_xla.orchestrate.rewrite_model import rewrite_for
from ember_xla.runtime.compare import VERIFY_ATOL, mismatch_line


@pytest.fixture(scope="module")
def dense_model(tmp_path_factory):
    """(model, inputs, .pb path): an nn.Embed bag sum concatenated with a dense feature and
    two ReLU layers; the weights are scaled so that outputs reach ~1e4 (a rounding difference
    of the dense part is then far above the absolute tolerance)."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.hlo_import.proto import module_to_proto

    class Net(nn.Module):
        @nn.compact
        def __call__(self, ids, dense):
            e = nn.Embed(1000, 64)(ids).sum(1)
            x = jnp.concatenate([e, nn.Dense(64)(dense)], 1)
            for w in (512, 256):
                x = nn.relu(nn.Dense(w)(x))
            return nn.Dense(1)(x)

    net = Net()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, (64, 20)).astype(np.int32)
    dense = (rng.normal(size=(64, 13)) * 10).astype(np.float32)
    flat, tree = jax.tree_util.tree_flatten(net.init(jax.random.PRNGKey(0), ids, dense))

    def f(*a):
        *p, i, d = a
        return net.apply(jax.tree_util.tree_unflatten(tree, p), i, d)

    inputs = [np.asarray(x) * 30 for x in flat] + [ids, dense]
    model = from_jax(f, *inputs)
    path = tmp_path_factory.mktemp("flax") / "m.pb"
    path.write_bytes(module_to_proto(model.module))
    np.savez(path.with_name("inputs.npz"), *inputs)
    return model, inputs, path


def _emulate(dense_model, **tol):
    """The full functional engine: each cluster's emulated outputs are checked."""
    model, inputs, _ = dense_model
    rewritten = rewrite_for(model.module, "dae").module
    return emulate_module(model.module, rewritten, inputs,
                          EmulateOptions(load_target("tmu"), 3, "xla", **tol))


def test_clusters_bit_exact_dense_part_rounds_and_passes(dense_model):
    em = _emulate(dense_model)
    v = em.report.verify
    checks = v["clusters_vs_native"]
    assert checks and all(c["bitwise_equal"] for c in checks)
    m = v["model"]
    assert not m["bitwise_equal"] and m["max_abs_diff"] > VERIFY_ATOL  # the old rule failed
    assert m["ok"] and v["ok"] and em.ok and m["tolerance_ratio"] <= 1.0


def test_absolute_only_fails_naming_output_and_index(dense_model):
    em = _emulate(dense_model, verify_rtol=0.0)
    m = em.report.verify["model"]
    assert not em.ok and not m["ok"]
    w = m["worst"]
    assert w["output"] == 0 and len(w["where"]) == 2 and w["max_abs_diff"] > VERIFY_ATOL
    line = mismatch_line(m, m["atol"])
    assert line.startswith(f"output 0 differs from the original's by {w['max_abs_diff']:.3g} "
                           f"at index {w['where']} (the original's ")
    assert line.endswith("> --verify_atol=0.0001 + --verify_rtol=0 x |original|)")


def _inputs_flag(path):
    return f"--inputs={path.with_name('inputs.npz')}"


@pytest.mark.parametrize("target", ["tmu", "tmu8"])
def test_emulate_cli_passes_then_fails_with_rtol_0(dense_model, tmp_path, cli, target):
    _, _, path = dense_model
    extra = ["--placement=auto"] if target == "tmu8" else []
    ok = cli("emulate", str(path), f"--target={target}", _inputs_flag(path), "--json", *extra)
    assert ok.returncode == 0, ok.stderr[-3000:]
    rep = json.loads(ok.stdout)
    assert rep["verify"]["model"]["ok"] and not rep["verify"]["model"]["bitwise_equal"]
    plan = tmp_path / "plan.json"
    saved = [f"--save_plan={plan}"] if target == "tmu8" else []
    bad = cli("emulate", str(path), f"--target={target}", _inputs_flag(path), "--json",
              "--verify_rtol=0", *extra, *saved)
    assert bad.returncode == 1, bad.stderr[-3000:]
    assert bad.stdout == "" and not plan.exists()
    line = [ln for ln in bad.stderr.splitlines() if "MISMATCH" in ln or "error" in ln]
    assert line and "output 0 differs from the original's by" in line[0], bad.stderr
    assert "at index [" in line[0] and "--verify_rtol=0 x |original|" in line[0]


def test_rewrite_verify_uses_the_same_rule(dense_model, tmp_path, cli):
    _, _, path = dense_model
    ok = cli("rewrite", str(path), "--out", str(tmp_path / "o"), "--verify", "--rewrite_all")
    assert ok.returncode == 0, ok.stderr[-3000:]
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["clusters"] and rep["verify"]["tolerance_ratio"] <= 1.0
    assert rep["verify"]["rtol"] == 1e-5
