"""The import-time check of typed-FFI ``backend_config`` dictionaries: the forms on which XLA:CPU
crashes the process are refused with a one-line error; valid forms (and forms the check does
not know) pass, and a module that passes compiles and runs on XLA:CPU."""

from pathlib import Path

import pytest

from ember_xla.hlo.ffi_config import check_backend_config
from ember_xla.ir.operation import Operation

DOC = Path(__file__).parents[2] / "docs" / "CUSTOM_CALL.md"


def call(config: str, api: object = "API_VERSION_TYPED_FFI") -> Operation:
    return Operation("custom-call", [], [], {"custom_call_api_version": api,
                                             "backend_config": config.encode()})


@pytest.mark.parametrize("config", [
    '{a = -1 : f64}', '{a = 3e5 : f64}', '{a = 2 : f32}', '{x = "s", a = 7 : bf16}',
    '{a = -inf : f64}', '{a = nan}', '{a = inf : f32}', '{a = "open}', '{a = [1, 2}',
    'a = 1', '{a = 1 : i64]}'])
def test_crash_forms_are_refused(config):
    problem = check_backend_config(call(config))
    assert problem and problem.startswith("backend_config")


@pytest.mark.parametrize("config", [
    "", "{}", '{a = -1.0 : f64}', '{a = 3.0e5 : f64}', '{a = 0xFFF0000000000000 : f64}',
    '{a = 3 : i64, b = true, s = "x = -1 : f64, }"}', "{unit_attr, b = false}",
    '{m = affine_map<(d0) -> (d0)>, d = dense<[1, 2]> : tensor<2xi32>}',
    '{nested = {a = 1.5 : f32}, arr = [1, 2, 3]}', '{t = #foo.bar<"x">}'])
def test_valid_and_unknown_forms_pass(config):
    assert check_backend_config(call(config)) is None


def test_only_typed_ffi_calls_are_checked():
    assert check_backend_config(call("{a = -1 : f64}", api="API_VERSION_STATUS_RETURNING")) is None
    other = Operation("add", [], [], {"custom_call_api_version": "API_VERSION_TYPED_FFI",
                                      "backend_config": b"{a = -1 : f64}"})
    assert check_backend_config(other) is None


def _doc_module() -> str:
    text = DOC.read_text()
    start = text.index("HloModule ember_example")
    return text[start:text.index("```", start)]


def test_doc_example_with_bad_float_is_a_one_line_error(tmp_path, cli):
    bad = tmp_path / "bad.hlo"
    bad.write_text(_doc_module().replace("init = 0xFFF0000000000000 : f64", "init = -1 : f64"))
    proc = cli("run", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("ember-xla: error:")]
    assert len(line) == 1 and "instruction r" in line[0] and "decimal point" in line[0]


def test_doc_example_with_good_float_runs(tmp_path, cli):
    good = tmp_path / "good.hlo"
    good.write_text(_doc_module().replace("init = 0xFFF0000000000000 : f64", "init = -1.5 : f64"))
    proc = cli("run", str(good))
    assert proc.returncode == 0, proc.stderr
    assert "float32[3, 2]" in proc.stdout
