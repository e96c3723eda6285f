"""HLO text whose large constants XLA printed without values (``constant({...})``, the
default of ``as_hlo_text()``): ``inspect`` reads it and says which constants are elided;
commands that need the values refuse in one line naming them."""

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    import jax
    import jax.numpy as jnp

    table = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)

    def f(ids):  # the table is a constant of the module
        return jnp.sum(jnp.take(jnp.asarray(table), ids, axis=0), axis=0)

    hlo = jax.jit(f).lower(np.zeros(8, np.int32)).compiler_ir("hlo")
    d = tmp_path_factory.mktemp("elided")
    elided, full = hlo.as_hlo_text(), hlo.as_hlo_text(True)
    assert "{...}" in elided and "{...}" not in full
    (d / "elided.hlo").write_text(elided)
    (d / "full.hlo").write_text(full)
    return d


def test_inspect_reads_elided_constants_and_names_them(texts, cli):
    p = cli("inspect", str(texts / "elided.hlo"))
    assert p.returncode == 0, p.stderr
    assert "elided constants (printed as {...}, values not in the text): 1" in p.stdout
    assert "f32[300,16]" in p.stdout.split("elided constants")[1]
    j = cli("inspect", str(texts / "elided.hlo"), "--json")
    assert j.returncode == 0, j.stderr
    (entry,) = json.loads(j.stdout)["elided_constants"]
    assert entry.endswith("f32[300,16]{1,0}")
    full = cli("inspect", str(texts / "full.hlo"), "--json")
    assert "elided_constants" not in json.loads(full.stdout)


@pytest.mark.parametrize("command", [["rewrite", "--out", "OUT"], ["run"], ["lower"]])
def test_commands_needing_values_refuse_in_one_line(texts, tmp_path, cli, error_line,
                                                    command):
    args = [a.replace("OUT", str(tmp_path / "o")) for a in command]
    line = error_line(cli(args[0], str(texts / "elided.hlo"), *args[1:]))
    assert "1 constant printed without values ({...})" in line and "f32[300,16]" in line
    assert not (tmp_path / "o").exists()
    ok = cli(args[0], str(texts / "full.hlo"), *args[1:])
    assert ok.returncode == 0, ok.stderr
