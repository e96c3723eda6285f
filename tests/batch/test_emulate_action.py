"""``ember-xla batch --actions=rewrite,emulate``: the emulate command's ``batch_action`` runs
each model on the emulated target, writes emulate.json and adds ``emulated_cycles`` to the
summary. Cost: ~15 s."""

import csv
import json

import numpy as np
import pytest


def _model(path):
    import jax
    import jax.numpy as jnp

    def f(t, i, s):
        return jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=8)

    lo = jax.jit(f).lower(np.ones((100, 16), np.float32), np.zeros(40, np.int32),
                          np.zeros(40, np.int32))
    path.write_bytes(lo.compiler_ir("hlo").as_serialized_hlo_module_proto())


def _emulate_job(tmp_path, kit, *flags):
    """One model through ``--actions=rewrite,emulate``: (its summary row, its emulate.json)."""
    models = tmp_path / "in"
    models.mkdir()
    _model(models / "bag.pb")
    out = tmp_path / "out"
    p = kit.run(f"--inputs={models}/*.pb", f"--out={out}", "--actions=rewrite,emulate",
                *flags, "--progress=none")
    assert p.returncode == 0, p.stderr[-3000:]
    with open(out / "summary.csv") as f:
        (row,) = list(csv.DictReader(f))
    return row, json.loads((out / "models" / "bag.pb" / "emulate.json").read_text())


def test_emulate_action(tmp_path, kit):
    row, rep = _emulate_job(tmp_path, kit, "--target=tmu", "-O1")
    assert rep["level"] == "O1" and rep["target"] == "tmu" and rep["verify"]["ok"]
    assert float(row["emulated_cycles"]) == rep["total_cycles"] > 0


def test_emulate_action_on_npu(tmp_path, kit):
    """An NPU target: the model's tables placed (auto), the makespan in the summary."""
    row, rep = _emulate_job(tmp_path, kit, "--target=npu")
    assert rep["policy"] == "auto" and rep["verify"]["ok"] and len(rep["cores"]) == 8
    assert rep["makespan_cycles"] > 0  # the summary rounds to 2 decimals
    assert float(row["emulated_cycles"]) == pytest.approx(rep["makespan_cycles"], abs=0.01)


def test_emulate_action_on_dae_cores(tmp_path, kit):
    """A multi-core DAE target: every cluster placed (auto) on its cores, the makespan."""
    row, rep = _emulate_job(tmp_path, kit, "--target=tmu8")
    assert rep["policy"] == "auto" and rep["verify"]["ok"] and len(rep["per_core"]) == 8
    assert rep["makespan_cycles"] > 0
    assert float(row["emulated_cycles"]) == pytest.approx(rep["makespan_cycles"], abs=0.01)
