"""Defaults of the commands that rewrite: table batching is on everywhere (``--nogroup_tables``
opts out), and the DAE commands never consult the CPU's cost model (a cluster the CPU keeps in
XLA is still lowered, emulated and placed). Real exports, the real console script."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.orchestrate.rewrite_model import rewrite_for

COST_ON = {"EMBER_XLA_COST_MODEL": "on"}


def _three_tables():
    import jax
    import jax.numpy as jnp

    def f(t0, t1, t2, i0, i1, i2, s0, s1, s2):
        return jnp.concatenate([jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=4)
                                for t, i, s in ((t0, i0, s0), (t1, i1, s1), (t2, i2, s2))],
                               axis=1)

    rng = np.random.default_rng(0)
    return f, ([rng.standard_normal((50, 8), dtype=np.float32) for _ in range(3)]
               + [rng.integers(0, 50, 12, dtype=np.int32) for _ in range(3)]
               + [np.repeat(np.arange(4, dtype=np.int32), 3) for _ in range(3)])


def _tiny():
    """Two lookups at B=1: the CPU cost model keeps them in XLA."""
    import jax
    import jax.numpy as jnp

    def f(t, i, s):
        return jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=1)

    return f, (np.ones((20, 16), np.float32), np.array([3, 7], np.int32),
               np.array([0, 0], np.int32))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("gd")
    from ember_xla.hlo_import.proto import module_to_proto

    for name, (f, args) in {"three": _three_tables(), "tiny": _tiny()}.items():
        (d / f"{name}.pb").write_bytes(module_to_proto(from_jax(f, *args).module))
    return d


def _targets(out):
    rep = json.loads((out / "report.json").read_text())
    return rep, (out / "rewritten.hlo").read_text()


def test_rewrite_groups_by_default_and_nogroup_opts_out(models, tmp_path, cli):
    p = cli("rewrite", str(models / "three.pb"), "--out", str(tmp_path / "g"))
    assert p.returncode == 0, p.stderr
    rep, text = _targets(tmp_path / "g")
    assert len(rep["clusters"]) == 3 and len(rep["groups"]) == 1
    assert "ember.grouped_segment_reduce_concat" in text
    p = cli("rewrite", str(models / "three.pb"), "--out", str(tmp_path / "s"), "--nogroup_tables")
    assert p.returncode == 0, p.stderr
    rep, text = _targets(tmp_path / "s")
    assert len(rep["clusters"]) == 3 and not rep["groups"]
    assert text.count('custom_call_target="ember.segment_reduce"') == 3


def test_lower_groups_without_the_concatenating_form(models, cli):
    p = cli("lower", str(models / "three.pb"))
    assert p.returncode == 0, p.stderr
    assert "1 ember cluster(s)" in p.stdout + p.stderr
    assert "grouped_segment_reduce" in p.stdout and "_concat" not in p.stdout
    p = cli("lower", str(models / "three.pb"), "--nogroup_tables")
    assert p.returncode == 0, p.stderr
    assert "3 ember cluster(s)" in p.stdout + p.stderr


def test_dae_commands_never_consult_the_cpu_cost_model(models, tmp_path, cli):
    p = cli("rewrite", str(models / "tiny.pb"), "--out", str(tmp_path / "r"), extra_env=COST_ON)
    assert p.returncode == 0, p.stderr
    rep, _ = _targets(tmp_path / "r")
    assert not rep["clusters"] and any(n.get("kept_in_xla") for n in rep["near_misses"])
    p = cli("lower", str(models / "tiny.pb"), extra_env=COST_ON)
    assert p.returncode == 0, p.stderr
    assert "1 ember cluster(s)" in p.stdout + p.stderr
    p = cli("emulate", str(models / "tiny.pb"), extra_env=COST_ON)
    assert p.returncode == 0, p.stderr
    assert "1 embedding cluster(s) rewritten" in p.stderr


def test_rewrite_for_a_dae_machine_refuses_the_cost_model(monkeypatch):
    monkeypatch.setenv("EMBER_XLA_COST_MODEL", "on")
    f, args = _tiny()
    module = from_jax(f, *args).module
    assert not rewrite_for(module, "cpu").clusters
    assert len(rewrite_for(module, "dae").clusters) == 1
    with pytest.raises(ValueError, match="never uses the CPU's cost model"):
        rewrite_for(module, "dae", cost_model=True)
