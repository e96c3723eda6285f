"""What ``ember-xla rewrite`` writes for a JAX function, for the benchmarks: the function
exported as an HloModuleProto, the real console script run on it in a separate process (no
flags but ``--nogroup_tables`` when asked; the cost-model environment variable removed), and
the rewritten module read back with its report."""

from __future__ import annotations

import json
import os
import sys


def cli_rewrite(stage, inputs, group: bool = True):
    """What a user gets: the stage exported as an HloModuleProto, ``ember-xla rewrite
    model.pb --out D`` (with ``--nogroup_tables`` when not ``group``; no other flag) run as a
    separate process, and ``D/rewritten.pb`` read back with its report."""
    import subprocess
    import tempfile
    from pathlib import Path

    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.hlo_import.proto import module_from_proto, module_to_proto

    work = Path(tempfile.mkdtemp(prefix="bench_embedding_"))
    specs = [jax_spec(x) for x in inputs]
    (work / "model.pb").write_bytes(module_to_proto(from_jax(stage, *specs).module))
    script = Path(sys.executable).with_name("ember-xla")
    cmd = [str(script)] if script.exists() else [sys.executable, "-c",
                                                 "from ember_xla.cli import run; run()"]
    cmd += ["rewrite", str(work / "model.pb"), "--out", str(work / "out")]
    cmd += [] if group else ["--nogroup_tables"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_XLA_COST")}
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    module = module_from_proto((work / "out" / "rewritten.pb").read_bytes(), "rewritten.pb")
    report = json.loads((work / "out" / "report.json").read_text())
    return module, report, " ".join(["ember-xla"] + cmd[1:2] + ["model.pb", "--out", "D"]
                                    + ([] if group else ["--nogroup_tables"]))


def jax_spec(x):
    import jax

    return jax.ShapeDtypeStruct(x.shape, x.dtype)
