"""``ember-xla opt FILE.mlir [--pipeline=P] [--print-after-all] [--out FILE]``: parse the
generic text IR of the Ember levels (docs/IR.md), verify it, run a pass pipeline (verifying
after every pass) and print the result, like ``mlir-opt``/``xdsl-opt``. Every failure — an
unreadable file, a parse error (``file:line:col``), IR that fails verification, a bad pipeline
string, a pass that refuses its input — is one line on stderr and exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ember_xla.ir.dialect import VerifyError
from ember_xla.ir.graph import Module
from ember_xla.ir.passes import ModulePass, PassPipeline, parse_pipeline, pipeline_string
from ember_xla.ir.printer import print_module
from ember_xla.orchestrate.errors import UsageError
from ember_xla.util.atomic import write_atomic
from ember_xla.util.input_files import open_regular

#: Header of each dump of --print-after-all (as mlir-opt spells it; a comment in the IR text).
DUMP_HEADER = "// -----// IR Dump After {} //----- //"


def load_dae_registry() -> None:
    """Register the Ember-level dialects and passes (the parser and pipelines need them)."""
    import ember_xla.dae_target.dialects  # noqa: F401
    import ember_xla.dae_target.passes  # noqa: F401


def parse_passes(text: str) -> list[ModulePass]:
    """Parse a pipeline string of the Ember-level passes (``PipelineError`` if bad)."""
    load_dae_registry()
    return parse_pipeline(text)


def verify_ir(module: Module, where: str) -> None:
    """Structural + per-op verification; the error names ``where`` (a file, a pass)."""
    from ember_xla.ir.verify import verify_generic_module

    try:
        verify_generic_module(module)
    except VerifyError as e:
        raise VerifyError(f"{where}: {e}") from None


def run_passes(module: Module, passes: list[ModulePass],
               after: Callable[[ModulePass, Module, Any], None] | None = None,
               where: str = "") -> Module:
    """Run ``passes`` in order on ``module`` (in place) with the pass driver, verifying after
    each; ``after(pass, module, what_the_pass_returned)`` sees every intermediate module. An
    error names ``where`` and the pass."""

    def failed(p: ModulePass, e: Exception) -> Exception | None:
        if not isinstance(e, (VerifyError, ValueError, KeyError)):
            return None
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        return ValueError(f"{where}pass {pipeline_string([p])}: {msg}")

    return PassPipeline.from_spec(
        passes, callback=after, on_error=failed,
        verify=lambda m, p: verify_ir(m, f"{where}after pass {pipeline_string([p])}"),
    ).apply(module)


def opt_main(args: list[str], flags: Any, out: Any = sys.stdout) -> int:
    from ember_xla.ir.parser import parse_module

    if len(args) != 1:
        raise UsageError("opt takes exactly one FILE.mlir argument")
    if flags.cluster is not None or flags.verify:
        raise UsageError("--cluster and --verify belong to `ember-xla lower`, not opt")
    passes = parse_passes(flags.pipeline or "")
    if flags.opt_level is not None:
        if flags.pipeline:
            raise UsageError("give either -O<n> or --pipeline, not both")
        passes = parse_passes(level_pipeline(flags.opt_level))
    path = args[0]
    try:
        with open_regular(path) as f:
            text = f.read().decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    load_dae_registry()
    module = parse_module(text, path)
    verify_ir(module, path)
    dumps: list[str] = []

    def after(p: ModulePass, m: Module, changed: Any) -> None:
        if flags.print_after_all:
            notes = "".join(f"// {ln}\n" for ln in str(changed or "").splitlines())
            dumps.append(DUMP_HEADER.format(pipeline_string([p])) + "\n" + notes
                         + print_module(m))

    run_passes(module, passes, after, where=f"{path}: ")
    result = print_module(module)
    if flags.out:
        write_atomic(flags.out, result)
    for d in dumps:
        out.write(d)
    if not flags.out:
        out.write(result)
    return 0


def level_pipeline(level: int) -> str:
    """The pass pipeline of ``-O<level>`` (after lowering to SLC)."""
    from ember_xla.dae_target.passes import levels

    try:
        return levels.LEVELS[levels.parse_level(level)]
    except levels.UnknownLevel as e:
        raise UsageError(str(e)) from None
