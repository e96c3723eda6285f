"""Malformed input gives a one-line error naming the place, and exit code 2 — from the real
``ember-xla`` entry point, in a subprocess, with no traceback."""


import pytest


@pytest.fixture(scope="module")
def good_proto(tmp_path_factory):
    import jax
    import jax.numpy as jnp
    import numpy as np

    d = tmp_path_factory.mktemp("m")
    lo = jax.jit(lambda t, i: jnp.take(t, i, axis=0).sum(0)).lower(
        np.ones((10, 4), np.float32), np.zeros(3, np.int32))
    (d / "m.pb").write_bytes(lo.compiler_ir("hlo").as_serialized_hlo_module_proto())
    (d / "m.hlo").write_text(lo.compiler_ir("hlo").as_hlo_text())
    return d


def test_truncated_proto(good_proto, tmp_path, cli, error_line):
    data = (good_proto / "m.pb").read_bytes()
    bad = tmp_path / "trunc.pb"
    # one byte short: the last field is always incomplete (a cut at half the length can land on
    # a field boundary past the computations when the stack-frame index, written last, is large)
    bad.write_bytes(data[:-1])
    line = error_line(cli("inspect", str(bad)))
    assert str(bad) in line and "HloModuleProto" in line


def test_random_bytes(tmp_path, cli, error_line):
    bad = tmp_path / "rand.pb"
    bad.write_bytes(bytes(range(7, 256, 3)) * 5)
    line = error_line(cli("inspect", str(bad)))
    assert str(bad) in line


@pytest.mark.parametrize("name,data", [
    ("bad.mlir", b"module {\n  garbage\n}\n"),                 # an unknown op
    ("cut.mlir", b"module @m {\n  func.func @main(%a: tensor<2xf32>"),  # cut short
    ("m.bin", b"ML\xefR" + bytes(range(40))),                    # bytecode magic, then junk
])
def test_bad_stablehlo(tmp_path, cli, error_line, name, data):
    bad = tmp_path / name
    bad.write_bytes(data)
    line = error_line(cli("inspect", str(bad)))
    assert str(bad) in line and "not a StableHLO module XLA can read" in line


@pytest.mark.parametrize("kind", ["platforms", "symbolic"])
def test_jax_export_it_cannot_take(tmp_path, cli, error_line, kind):
    """jax.export serializations whose module takes extra arguments: one line saying how to
    export instead."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def f(t, i):
        return jnp.take(t, i, axis=0).sum(1)

    t, i = np.ones((10, 4), np.float32), np.zeros((2, 3), np.int32)
    if kind == "platforms":
        exp = jax.export.export(jax.jit(f), platforms=["cpu", "cuda"])(t, i)
        want = "export it for the CPU only"
    else:
        (b,) = jax.export.symbolic_shape("b")
        exp = jax.export.export(jax.jit(f))(t, jax.ShapeDtypeStruct((b, 3), np.int32))
        want = "export it with concrete shapes"
    bad = tmp_path / "m.jaxexport"
    bad.write_bytes(exp.serialize())
    line = error_line(cli("inspect", str(bad)))
    assert str(bad) in line and "cannot read this jax.export serialization" in line
    assert want in line


def test_symbolic_stablehlo_text_says_to_export_concrete_shapes(tmp_path, cli, error_line):
    """The StableHLO text of a symbolic-shape export (what ``Exported.mlir_module()`` prints):
    one line saying so and what to export, not XLA's dynamic-broadcast error."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    (b,) = jax.export.symbolic_shape("b")
    exp = jax.export.export(jax.jit(lambda t, i: jnp.take(t, i, axis=0).sum(1)))(
        np.ones((10, 4), np.float32), jax.ShapeDtypeStruct((b, 3), np.int32))
    bad = tmp_path / "m.mlir"
    bad.write_text(exp.mlir_module())
    line = error_line(cli("inspect", str(bad)))
    assert "symbolic (dynamic) shapes" in line and "export it with concrete shapes" in line


def test_bad_text_reports_line_and_column(good_proto, tmp_path, cli, error_line):
    lines = (good_proto / "m.hlo").read_text().splitlines()
    k = next(i for i, ln in enumerate(lines) if " = " in ln and "parameter" not in ln)
    lines[k] = lines[k].replace(" = ", " = f32[2,", 1)
    bad = tmp_path / "bad.hlo"
    bad.write_text("\n".join(lines))
    line = error_line(cli("inspect", str(bad)))
    assert f"{bad}:{k + 1}:" in line


def test_unknown_opcode(tmp_path, cli, error_line):
    bad = tmp_path / "op.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n"
                   "  ROOT q = f32[2]{0} frobnicate(p)\n}\n")
    line = error_line(cli("inspect", str(bad)))
    assert f"{bad}:5:21: unknown opcode 'frobnicate'" in line


def test_missing_file(tmp_path, cli, error_line):
    line = error_line(cli("inspect", str(tmp_path / "nope.pb")))
    assert "no such file" in line


def test_savedmodel_without_signatures(tmp_path, cli, error_line):
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
        def f(self, x):
            return x + 1.0

    d = tmp_path / "sm"
    tf.saved_model.save(M(), str(d), signatures={})
    line = error_line(cli("inspect", str(d)))
    assert "no serving signatures" in line and str(d) in line


def test_unknown_command_and_no_args(cli):
    assert cli().returncode == 2
    p = cli("frob", "x")
    assert p.returncode == 2 and "unknown command" in p.stderr


def test_help_lists_flags(cli):
    p = cli("--help")
    assert p.returncode == 0
    assert "--signature" in p.stdout + p.stderr


def test_inspect_ok(good_proto, cli):
    p = cli("inspect", str(good_proto / "m.pb"))
    assert p.returncode == 0, p.stderr
    assert "gathers/scatters: 1" in p.stdout
    assert "param 0" in p.stdout


def test_elided_constant_is_refused_with_advice(tmp_path, cli, error_line):
    bad = tmp_path / "elided.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  ROOT c = f32[3]{0} constant({...})\n}\n")
    ok = cli("inspect", str(bad))  # inspecting needs no values: it lists the elided one
    assert ok.returncode == 0 and "  c f32[3]{0}" in ok.stdout, ok.stderr
    line = error_line(cli("run", str(bad)))
    assert f"{bad}:" in line and "1 constant printed without values ({...}): c f32[3]" in line
    assert "as_hlo_text(True)" in line
