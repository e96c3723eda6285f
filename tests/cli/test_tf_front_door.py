"""The TF front door end to end, real TF and Keras 3: a Keras model saved with
``tf.saved_model.save`` (batch size unknown) is rewritten, and ``ember-xla run`` runs the
result on the signature's inputs only (the variables travel in ``params.npz``), equal to the
SavedModel's own outputs; parameters and report entries carry the TF names; the unknown batch
size is announced; bad inputs are one line naming the input."""

import json
import os

import numpy as np
import pytest

B = 16  # the batch size the test serves (the signature leaves it unknown)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(5)
    ids = keras.Input((5,), dtype="int32", name="ids")
    dense = keras.Input((13,), dtype="float32", name="dense")
    rows = keras.layers.Embedding(500, 8, name="emb_a")(ids)
    pooled = keras.ops.sum(rows, axis=1)
    out = keras.layers.Dense(4, name="top")(keras.ops.concatenate([pooled, dense], axis=1))
    model = keras.Model({"ids": ids, "dense": dense}, out)

    @tf.function(input_signature=[{"ids": tf.TensorSpec([None, 5], tf.int32, name="ids"),
                                   "dense": tf.TensorSpec([None, 13], tf.float32,
                                                          name="dense")}])
    def serve(x):
        return {"score": model(x)}

    d = tmp_path_factory.mktemp("keras")
    tf.saved_model.save(model, str(d / "sm"), signatures={"serving_default": serve})
    rng = np.random.default_rng(1)
    x = {"ids": rng.integers(0, 500, (B, 5)).astype(np.int32),
         "dense": rng.standard_normal((B, 13)).astype(np.float32)}
    np.savez(d / "in.npz", **x)
    loaded = tf.saved_model.load(str(d / "sm"))  # kept alive: the signature uses its variables
    sig = loaded.signatures["serving_default"]
    feeds = {k: tf.constant(v) for k, v in x.items()}
    eager = sig(**feeds)["score"].numpy()
    xla = tf.function(lambda **kw: sig(**kw), jit_compile=True)(**feeds)["score"].numpy()
    return d, x, eager, xla


@pytest.fixture(scope="module")
def rewritten(saved, tmp_path_factory):
    import subprocess
    import sys
    from pathlib import Path

    d, *_ = saved
    out = tmp_path_factory.mktemp("rw") / "D"
    script = Path(sys.executable).with_name("ember-xla")
    p = subprocess.run([str(script), "rewrite", str(d / "sm"), "--out", str(out), "--verify",
                        f"--unknown_dim={B}", "--rewrite_all"],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert p.returncode == 0, p.stderr
    return out, p


def test_rewrite_names_parameters_and_keeps_variables(rewritten):
    out, p = rewritten
    assert f"built with size {B}" in p.stderr and "--unknown_dim=N" in p.stderr
    rep = json.loads((out / "report.json").read_text())
    params = {e["name"]: e for e in rep["parameters"]}
    assert params["ids"] == {"number": 1, "name": "ids", "shape": f"s32[{B},5]{{1,0}}",
                             "source_name": "ids", "bound": False}
    assert params["emb_a.embeddings"]["source_name"] == "emb_a/embeddings"
    assert params["emb_a.embeddings"]["bound"] and params["top.kernel"]["bound"]
    assert [c["table"]["instruction"] for c in rep["clusters"]] == ["emb_a.embeddings"]
    assert rep["clusters"][0]["table"]["source_name"] == "emb_a/embeddings"
    assert any("unknown dimensions built with size" in n for n in rep["notices"])
    npz = np.load(out / "params.npz")
    assert sorted(npz.files) == ["emb_a.embeddings", "top.bias", "top.kernel"]
    assert json.loads((out / "outputs.json").read_text()) == {"outputs": ["score"]}
    assert npz["emb_a.embeddings"].shape == (500, 8)


def test_run_on_signature_inputs_equals_saved_model(saved, rewritten, tmp_path, cli):
    d, x, eager, xla = saved
    out, _ = rewritten
    for model in (out / "rewritten.pb", out / "rewritten.hlo"):
        r = cli("run", str(model), "--inputs", str(d / "in.npz"), "--outputs",
                str(tmp_path / "y.npz"))
        assert r.returncode == 0, r.stderr
        assert "output 0 'score': float32[16, 4]" in r.stdout, r.stdout
        saved_outputs = np.load(tmp_path / "y.npz")
        assert saved_outputs.files == ["score"]  # the signature's output name, not arr_0
        got = saved_outputs["score"]
        # bit for bit what the SavedModel computes compiled by XLA; TF's own (non-XLA) kernels
        # sum the dense layer's products in another order, so within float rounding of it
        assert np.array_equal(got, xla)
        np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-6)


def test_unknown_dim_default_is_announced(saved, cli):
    d, *_ = saved
    r = cli("inspect", str(d / "sm"))
    assert r.returncode == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("ember-xla: note:")]
    assert len(notes) == 1 and "built with size 8" in notes[0], r.stderr
    assert "'ids' [?, 5] -> [8, 5]" in notes[0] and "--unknown_dim=N" in notes[0]
    assert "param 2: emb_a.embeddings f32[500,8]{1,0}  (bound: variable emb_a/embeddings)" \
        in r.stdout


@pytest.mark.parametrize("case,needle", [
    ("missing", "no array for input 'dense' f32[16,13]"),
    ("extra", "1 array(s) for no input: 'user' (expected: dense, ids)"),
    ("misshaped", "input 'ids' (parameter 1) is int32[3, 5], expected s32[16,5]"),
])
def test_bad_inputs_are_one_line_by_name(saved, rewritten, tmp_path, cli, error_line,
                                         case, needle):
    _, x, *_ = saved
    out, _ = rewritten
    feeds = dict(x)
    if case == "missing":
        del feeds["dense"]
    elif case == "extra":
        feeds["user"] = np.zeros(3, np.int32)
    else:
        feeds["ids"] = feeds["ids"][:3]
    np.savez(tmp_path / "bad.npz", **feeds)
    line = error_line(cli("run", str(out / "rewritten.pb"), "--inputs",
                          str(tmp_path / "bad.npz")))
    assert needle in line, line


def test_foreign_params_npz_is_one_line(rewritten, tmp_path, cli, error_line):
    out, _ = rewritten
    d = tmp_path / "copy"
    d.mkdir()
    (d / "rewritten.pb").write_bytes((out / "rewritten.pb").read_bytes())
    np.savez(d / "params.npz", **{"emb_a.embeddings": np.zeros((5, 8), np.float32)})
    line = error_line(cli("run", str(d / "rewritten.pb")))
    assert "params.npz" in line and "'emb_a.embeddings'" in line and "f32[500,8]" in line
    np.savez(d / "params.npz", nothing=np.zeros(2))
    line = error_line(cli("run", str(d / "rewritten.pb")))
    assert "'nothing', which names no parameter" in line


def test_batch_prints_the_unknown_dim_notice(saved, cli, tmp_path):
    d, *_ = saved
    out = tmp_path / "out"
    p = cli("batch", f"--inputs={d / 'sm'}", f"--out={out}", "--actions=rewrite",
            "--workers=1", "--progress=none")
    assert p.returncode == 0, p.stderr
    notes = [ln for ln in p.stdout.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1, p.stdout
    assert "built with size 8" in notes[0] and "'ids' [?, 5] -> [8, 5]" in notes[0]
    assert "--unknown_dim=N" in notes[0]
    rows = json.loads((out / "summary.json").read_text())["models"]
    assert any("built with size 8" in n for n in rows[0]["notices"])


def test_bad_outputs_json_is_one_line(rewritten, tmp_path, cli, error_line):
    out, _ = rewritten
    d = tmp_path / "copy"
    d.mkdir()
    for f in ("rewritten.pb", "params.npz"):
        (d / f).write_bytes((out / f).read_bytes())
    (d / "outputs.json").write_text('{"outputs": ["a", "a"]}')
    line = error_line(cli("run", str(d / "rewritten.pb")))
    assert "outputs.json" in line and "distinct non-empty names" in line


def test_bf16_variables_travel_and_run(tmp_path, cli):
    """A SavedModel whose table is bf16: ``params.npz`` holds it as np.savez stores bfloat16
    (raw ``|V2`` bytes), and ``run`` binds it back as bf16 (it refused the value before); a
    bf16 input given the same way is read as bf16 too."""
    import ml_dtypes
    import tensorflow as tf

    rng = np.random.default_rng(3)
    table = rng.standard_normal((300, 8)).astype(ml_dtypes.bfloat16)

    class M(tf.Module):
        def __init__(self):
            self.table = tf.Variable(tf.constant(table, tf.bfloat16), name="table_bf16")

        @tf.function(input_signature=[tf.TensorSpec([4, 6], tf.int32, name="ids"),
                                      tf.TensorSpec([4, 8], tf.bfloat16, name="bias")])
        def __call__(self, ids, bias):
            return {"pooled": tf.reduce_sum(tf.gather(self.table, ids), 1) + bias}

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.__call__})
    ids = rng.integers(0, 300, (4, 6)).astype(np.int32)
    bias = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "x.npz", ids=ids, bias=bias)
    r = cli("rewrite", str(tmp_path / "sm"), "--out", str(tmp_path / "D"), "--rewrite_all")
    assert r.returncode == 0, r.stderr[-2000:]
    assert np.load(tmp_path / "D" / "params.npz")["table_bf16"].dtype == np.dtype("V2")
    r = cli("run", str(tmp_path / "D" / "rewritten.pb"), "--inputs", str(tmp_path / "x.npz"),
            "--outputs", str(tmp_path / "y.npz"))
    assert r.returncode == 0, r.stderr[-2000:]
    got = np.load(tmp_path / "y.npz")["pooled"].view(ml_dtypes.bfloat16)
    want = m(tf.constant(ids), tf.constant(bias))["pooled"].numpy()
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-2,
                               atol=2e-2)


def test_training_step_outputs_are_named_after_the_variables(tmp_path, cli):
    """A training-step signature returns its loss; XLA adds the variables it assigns as
    outputs (aliased with their parameters): they are named ``<variable>:updated`` in
    ``outputs.json`` and by ``run`` (before: every output fell back to arr_<i>)."""
    import tensorflow as tf

    class Step(tf.Module):
        def __init__(self):
            self.table = tf.Variable(np.ones((50, 4), np.float32), name="table")

        @tf.function(input_signature=[tf.TensorSpec([3, 2], tf.int32, name="ids")])
        def __call__(self, ids):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.gather(self.table, ids) ** 2)
            g = tape.gradient(loss, self.table)
            self.table.scatter_sub(tf.IndexedSlices(0.1 * g.values, g.indices))
            return {"loss": loss}

    m = Step()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.__call__})
    r = cli("rewrite", str(tmp_path / "sm"), "--out", str(tmp_path / "D"))
    assert r.returncode == 0, r.stderr[-2000:]
    names = json.loads((tmp_path / "D" / "outputs.json").read_text())["outputs"]
    assert names == ["loss", "table:updated"]
    np.savez(tmp_path / "x.npz", ids=np.array([[1, 2], [2, 3], [4, 4]], np.int32))
    r = cli("run", str(tmp_path / "D" / "rewritten.pb"), "--inputs", str(tmp_path / "x.npz"))
    assert r.returncode == 0 and "output 1 'table:updated'" in r.stdout, r.stderr[-2000:]


def test_an_unknown_rank_is_named(tmp_path, cli, error_line):
    """A signature input of unknown rank cannot be given a size: one line naming it and the
    model, no output folder."""
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(None, tf.float32, name="x")])
        def serve(self, x):
            return {"y": x * 2.0}

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.serve})
    line = error_line(cli("rewrite", str(tmp_path / "sm"), "--out", str(tmp_path / "D")))
    assert "signature input 'x' has an unknown rank" in line and "sm[serving_default]" in line
    assert not (tmp_path / "D").exists()


@pytest.fixture(scope="module")
def graph_saved(tmp_path_factory):
    """A message-passing layer whose node and edge counts are both unknown."""
    import tensorflow as tf

    class Gnn(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.ones((4, 4)), name="w")

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x"),
                                      tf.TensorSpec([None], tf.int32, name="src"),
                                      tf.TensorSpec([None], tf.int32, name="dst")])
        def __call__(self, x, src, dst):
            msg = tf.gather(x, src)
            agg = tf.math.unsorted_segment_sum(msg, dst, tf.shape(x)[0])
            return {"h": tf.matmul(agg, self.w)}

    m = Gnn()
    d = tmp_path_factory.mktemp("gnn")
    tf.saved_model.save(m, str(d / "sm"), signatures={"serving_default": m.__call__})
    return d / "sm"


def test_unknown_dims_are_given_per_input_and_axis(graph_saved, cli):
    r = cli("inspect", str(graph_saved), "--unknown_dim=30,src:0=200,dst:0=200")
    assert r.returncode == 0, r.stderr
    (note,) = [ln for ln in r.stderr.splitlines() if ln.startswith("ember-xla: note:")]
    assert "built with sizes from --unknown_dim=30,src:0=200,dst:0=200" in note, note
    assert "'src' [?] -> [200]" in note and "'x' [?, 4] -> [30, 4]" in note
    assert "INPUT:AXIS=SIZE" in note
    assert "s32[200]" in r.stdout and "f32[30,4]" in r.stdout, r.stdout


@pytest.mark.parametrize("value,needle", [
    ("30,edges:0=200", "names no unknown dimension of a signature input: edges:0=200"),
    ("30,x:1=5", "names no unknown dimension of a signature input: x:1=5"),
    ("30,src=200", "'src=200' is neither a size N nor INPUT:AXIS=SIZE"),
    ("30,src:0=0", "expected an integer in [1, 2147483647], got '0'"),
    ("30,src:0=5,src:0=6", "src:0 is given twice"),
])
def test_a_bad_unknown_dim_is_one_line(graph_saved, cli, error_line, value, needle):
    line = error_line(cli("inspect", str(graph_saved), f"--unknown_dim={value}"))
    assert needle in line, line


def test_keras_export_signatures_of_one_function_are_rewritten_once(tmp_path, cli):
    """Keras 3's ``model.export`` writes ``serve`` and ``serving_default`` for one function:
    it is imported once (as serving_default, noted), so ``rewrite`` writes one result and
    ``batch`` does the work once; ``--signature serve`` still picks the other."""
    import keras

    ids = keras.Input((5,), dtype="int32", name="ids")
    rows = keras.layers.Embedding(500, 8, name="emb_a")(ids)
    model = keras.Model(ids, keras.layers.Dense(4, name="top")(keras.ops.sum(rows, axis=1)))
    model.export(str(tmp_path / "sm"), format="tf_saved_model", verbose=False)
    r = cli("rewrite", str(tmp_path / "sm"), "--out", str(tmp_path / "D"), "--unknown_dim=64")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "[serve]: the same function as [serving_default]" in r.stderr, r.stderr
    assert (tmp_path / "D" / "rewritten.pb").exists()
    assert not (tmp_path / "D" / "serve").exists()
    r = cli("inspect", str(tmp_path / "sm"), "--signature", "serve")
    assert r.returncode == 0 and "the same function" not in r.stderr, r.stderr
