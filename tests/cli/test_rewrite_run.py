"""``ember-xla rewrite`` / ``run`` end to end on real exports (JAX proto, HLO text, StableHLO
text and bytecode, a ``jax.export`` serialization, a TF
SavedModel with an embedding table variable): outputs written atomically, report.json lists
clusters and near-misses, --verify runs both modules on XLA:CPU, run executes the result."""

import json
import os

import numpy as np
import pytest


@pytest.fixture(scope="module")
def jax_model(tmp_path_factory):
    import jax
    import jax.numpy as jnp

    def f(t, i, s, w):
        pooled = jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=8)
        return jnp.tanh(pooled @ w)

    d = tmp_path_factory.mktemp("jm")
    lo = jax.jit(f).lower(np.ones((100, 16), np.float32), np.zeros(40, np.int32),
                          np.zeros(40, np.int32), np.ones((16, 4), np.float32))
    (d / "m.pb").write_bytes(lo.compiler_ir("hlo").as_serialized_hlo_module_proto())
    (d / "m.hlo").write_text(lo.compiler_ir("hlo").as_hlo_text())
    (d / "m.mlir").write_text(lo.as_text())  # StableHLO, jax's default text
    exported = jax.export.export(jax.jit(f))(*lo.args_info[0])
    (d / "stablehlo.bin").write_bytes(exported.mlir_module_serialized)  # MLIR bytecode
    (d / "m.jaxexport").write_bytes(exported.serialize())  # jax.export's own serialization
    return d


@pytest.mark.parametrize("src", ["m.pb", "m.hlo", "m.mlir", "stablehlo.bin", "m.jaxexport"])
def test_rewrite_verify_and_run(jax_model, tmp_path, src, cli):
    out = tmp_path / "out"
    p = cli("rewrite", str(jax_model / src), "--out", str(out), "--verify")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["report.json", "rewritten.hlo", "rewritten.pb"]
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["clusters"]) == 1
    c = rep["clusters"][0]
    assert c["kind"] == "segment_reduce" and c["attributes"]["index_mode"] == "fill"
    assert c["table"]["rows"] == 100 and c["table"]["dim"] == 16
    assert rep["verify"]["bitwise_equal"] is True
    assert "ember.segment_reduce" in (out / "rewritten.hlo").read_text()
    # the rewritten module runs, from proto and from text, with given inputs
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((100, 16)).astype(np.float32),
              rng.integers(-120, 120, 40).astype(np.int32),
              rng.integers(-1, 9, 40).astype(np.int32),
              rng.standard_normal((16, 4)).astype(np.float32)]
    np.savez(tmp_path / "in.npz", *arrays)
    outs = {}
    for name in ("rewritten.pb", "rewritten.hlo"):
        r = cli("run", str(out / name), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                str(tmp_path / f"{name}.npz"))
        assert r.returncode == 0, r.stderr
        outs[name] = np.load(tmp_path / f"{name}.npz")["arr_0"]
    r = cli("run", str(jax_model / src), "--inputs", str(tmp_path / "in.npz"), "--outputs",
            str(tmp_path / "orig.npz"))
    assert r.returncode == 0, r.stderr
    want = np.load(tmp_path / "orig.npz")["arr_0"]
    for got in outs.values():
        assert np.array_equal(got, want, equal_nan=True)


def test_run_takes_the_argument_names_and_times_on_the_device(jax_model, tmp_path, cli):
    """JAX's HLO names its parameters ``t.1``, ``i.1``...: ``run`` also takes the argument
    names the user wrote (``t``, ``i``); ``--repeat`` times the module on inputs already on
    the device."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "named.npz", t=rng.standard_normal((100, 16)).astype(np.float32),
             i=rng.integers(0, 100, 40).astype(np.int32), s=np.zeros(40, np.int32),
             w=np.ones((16, 4), np.float32))
    p = cli("run", str(jax_model / "m.pb"), "--inputs", str(tmp_path / "named.npz"),
            "--repeat", "3")
    assert p.returncode == 0, p.stderr
    assert "median time per run over 3 runs" in p.stdout and "(inputs on the device)" in p.stdout


def test_run_rejects_wrong_inputs(jax_model, tmp_path, cli):
    np.savez(tmp_path / "bad.npz", np.ones((3, 3), np.float32))
    p = cli("run", str(jax_model / "m.pb"), "--inputs", str(tmp_path / "bad.npz"))
    assert p.returncode == 2 and "parameter 0" in p.stderr and "Traceback" not in p.stderr


def test_rewrite_needs_out(jax_model, cli):
    p = cli("rewrite", str(jax_model / "m.pb"))
    assert p.returncode == 2 and "--out" in p.stderr


def test_rewrite_savedmodel_with_table_variable(tmp_path, cli):
    import tensorflow as tf

    rng = np.random.default_rng(3)

    class Rec(tf.Module):
        def __init__(self):
            super().__init__()
            self.table = tf.Variable(rng.standard_normal((500, 8)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([64], tf.int32),
                                      tf.TensorSpec([64], tf.int32)])
        def serve(self, ids, bag):
            rows = tf.nn.embedding_lookup(self.table, ids)
            return {"pooled": tf.math.unsorted_segment_sum(rows, bag, 16)}

    m = Rec()
    sm = tmp_path / "sm"
    tf.saved_model.save(m, str(sm), signatures={"serving_default": m.serve})
    out = tmp_path / "out"
    p = cli("rewrite", str(sm), "--out", str(out), "--verify")
    assert p.returncode == 0, p.stderr
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["clusters"]) == 1 and rep["verify"]["bitwise_equal"] is True
    assert rep["clusters"][0]["attributes"]["wrap_negative"] is False  # tf.gather: no wrap


def test_one_hot_lookup_with_assume_finite_tables(tmp_path, cli):
    """--assume_finite_tables turns a one-hot einsum lookup into a verified cluster (without
    it the lookup is a near-miss naming the flag: tests/rewrites/test_library_models.py)."""
    import jax
    import jax.numpy as jnp

    def f(t, ids):
        return jnp.einsum("bpv,vd->bpd", jax.nn.one_hot(ids, t.shape[0]), t).sum(1)

    lo = jax.jit(f).lower(np.ones((30, 8), np.float32), np.zeros((4, 5), np.int32))
    src = tmp_path / "onehot.pb"
    src.write_bytes(lo.compiler_ir("hlo").as_serialized_hlo_module_proto())
    out = tmp_path / "out"
    p = cli("rewrite", str(src), "--out", str(out), "--verify", "--assume_finite_tables")
    assert p.returncode == 0, p.stderr
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["clusters"]) == 1 and not rep["near_misses"]
    assert rep["verify"]["max_abs_diff"] <= 1e-4
