"""A SavedModel whose functions take a registered composite type (TF-GNN's GraphTensor is
one) loads only after its package is imported: without ``--tf_import`` the command says which
package in one line; with it the model is rewritten and verified (``rewrite``, ``batch``)."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    import tensorflow as tf
    from hlo_import.registered_pair import Pair, PairSpec

    spec = PairSpec(tf.TensorSpec([64], tf.int32), tf.TensorSpec([64], tf.int32))

    class Pool(tf.Module):
        def __init__(self):
            rng = np.random.default_rng(3)
            self.t = tf.Variable(rng.standard_normal((50, 8)).astype(np.float32), name="t")

        @tf.function(input_signature=[spec])
        def pool(self, e):
            return tf.math.unsorted_segment_sum(tf.gather(self.t, e.a), e.b, 16)

        @tf.function(input_signature=[tf.TensorSpec([64], tf.int32, name="src"),
                                      tf.TensorSpec([64], tf.int32, name="dst")])
        def serve(self, src, dst):
            return {"out": self.pool(Pair(src, dst))}

    m = Pool()
    d = tmp_path_factory.mktemp("pair") / "sm"
    tf.saved_model.save(m, str(d), signatures={"serving_default": m.serve})
    return str(d)


def _with_package(cli):
    import ember_xla

    home = str(Path(ember_xla.__file__).resolve().parents[1])
    path = os.pathsep.join([home, str(HERE)])
    return lambda *a: cli(*a, extra_env={"PYTHONPATH": path})


def test_a_missing_package_is_named(saved, cli, error_line, tmp_path):
    line = error_line(cli("rewrite", saved, "--out", str(tmp_path / "o")))
    assert "'registered_pair.PairSpec'" in line and "--tf_import=registered_pair" in line
    assert not (tmp_path / "o").exists()
    line = error_line(cli("inspect", saved, "--tf_import=no_such_package_here"))
    assert "--tf_import: cannot import no_such_package_here" in line


def test_rewrite_after_importing_the_package(saved, cli, tmp_path):
    p = _with_package(cli)("rewrite", saved, "--out", str(tmp_path / "o"), "--verify",
                           "--tf_import=registered_pair")
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert [c["kind"] for c in report["clusters"]] == ["segment_reduce"]
    assert "outputs bitwise equal: True" in p.stdout


def test_batch_workers_import_the_package(saved, cli, tmp_path):
    p = _with_package(cli)("batch", f"--inputs={saved}", f"--out={tmp_path / 'b'}",
                           "--tf_import=registered_pair", "--progress=none")
    assert p.returncode == 0, p.stderr[-3000:]
    p = cli("batch", f"--inputs={saved}", f"--out={tmp_path / 'c'}", "--progress=none")
    assert p.returncode != 0 and "--tf_import=registered_pair" in p.stdout + p.stderr
