"""Entry point of ``ember-xla``: parses absl flags, dispatches the sub-command."""

from __future__ import annotations

import sys

from absl import app, flags

import ember_xla.batch.flags  # noqa: F401  (the batch command's flags)
import ember_xla.cli.emulate_cmd  # noqa: F401  (the emulate command's flags)
import ember_xla.cli.place_cmd  # noqa: F401  (the place command's flags)
import ember_xla.cli.target_flag  # noqa: F401  (--target, shared)
from ember_xla.cli.errors import USAGE_EXIT, guarded, shorten
from ember_xla.cli.model_arg import load_arg
from ember_xla.orchestrate.errors import UsageError

FLAGS = flags.FLAGS
flags.DEFINE_bool("json", False, "inspect: print the summary as JSON.")
flags.DEFINE_string("signature", None, "SavedModel input: the serving signature to use "
                    "(default: every signature for inspect, the only one otherwise).")
flags.DEFINE_string("unknown_dim", "8", "SavedModel input: size given to unknown (None) "
                    "dimensions of a signature (e.g. the batch size you serve), and sizes of "
                    "single dimensions by input and axis: N,INPUT:AXIS=SIZE,... (e.g. "
                    "256,edges:1=5000); every command that uses them says so on stderr.")
flags.DEFINE_list("tf_import", [], "SavedModel input: Python packages to import before "
                  "TensorFlow loads the model: those that register its signatures' composite "
                  "types or its custom ops (e.g. tensorflow_gnn for a GraphTensor input).")

flags.DEFINE_string("out", None, "rewrite/batch: output folder for rewritten.pb, rewritten.hlo and "
                    "report.json (created if missing; files are replaced atomically).")
flags.DEFINE_bool("verify", False, "rewrite: run original and rewritten module on XLA:CPU on "
                  "random valid inputs and report the largest difference; lower: run each "
                  "level's interpreter against the cluster's outlined computation on XLA:CPU.")
flags.DEFINE_bool("group_tables", True, "rewrite/batch/lower/emulate: batch independent "
                  "segment reductions that share attributes into one table-batched call "
                  "(FBGEMM TBE-style; on by default, the cost model chooses grouped, separate "
                  "or XLA per call by predicted time); --nogroup_tables: one call per cluster.")
flags.DEFINE_bool("rewrite_all", False, "rewrite: also rewrite clusters the measured cost model "
                  "predicts faster in XLA (default: they stay in XLA and the report says so); "
                  "the same as EMBER_XLA_COST_MODEL=off.")
flags.DEFINE_bool("assume_finite_tables", False, "rewrite: promise that no table holds Inf/NaN,"
                  " so one-hot matmul/einsum lookups may become gathers (the one-hot product "
                  "turns a column with an Inf into NaN for every lookup; docs/IDIOMS.md).")
flags.DEFINE_integer("seed", 0, "rewrite/run: seed of the random inputs.")
flags.DEFINE_string("inputs", None, "run: .npz with one array per entry parameter (keys: "
                    "parameter names or arr_0, arr_1, ... as np.savez writes them); batch: "
                    "GLOB[,GLOB...] of models (SavedModel folders, .pb, .hlo/.txt).")
flags.DEFINE_string("outputs", None, "run: write the outputs to this .npz.")
flags.DEFINE_integer("repeat", 0, "run: also time this many runs and print the median.",
                     lower_bound=0)
flags.DEFINE_bool("tf", True, "example: also export, rewrite and verify the TensorFlow version.")
flags.DEFINE_string("pipeline", None, "lower/opt: passes to run, e.g. "
                    "'vectorize{vl=16},bufferize,decouple' (lower: instead of -O0..-O4).")
flags.DEFINE_integer("opt_level", None, "lower/emulate: optimization level, also spelled -O0 .. "
                     "-O4 (default -O3).")
flags.DEFINE_integer("cluster", None, "lower: lower only cluster N (0-based, in report order).")
flags.DEFINE_enum("emit", "ir", ["ir", "program"], "lower: print the IR levels (ir) or each "
                  "cluster's DAE program (program; --out writes clusterK.dae; "
                  "docs/DAE_PROGRAM.md).")
flags.DEFINE_integer("verify_elements", 50_000, "lower --verify: clusters reading more table "
                     "elements per run are checked at a small size of the same form.",
                     lower_bound=0)
flags.DEFINE_bool("print_after_all", False, "lower/opt: print the IR after every pass "
                  "(also --print-after-all).")
flags.DEFINE_integer("timing_repeats", 10, "example, batch --actions=...,time: timed runs per "
                     "module.", lower_bound=1)

COMMANDS = {
    "inspect": "inspect MODEL: entry signature, computations, opcode counts, gathers/scatters.",
    "rewrite": "rewrite MODEL --out DIR [--verify]: embedding clusters -> ember custom-calls.",
    "run": "run MODEL [--inputs X.npz] [--outputs Y.npz] [--repeat N]: execute on XLA:CPU.",
    "example": "example [--out DIR] [--notf]: export, rewrite, verify and time the built-in "
               "DLRM-style model.",
    "batch": "batch --inputs=GLOB[,GLOB] --out=DIR [--actions=rewrite,verify,time] "
             "[--workers=N] [--runner=local|beam] [--flagfile=F]: a fleet of models.",
    "lower": "lower MODEL [-O0..-O4 | --pipeline=P] [--cluster N] [--print-after-all] "
             "[--verify] [--emit=program] [--out DIR]: clusters -> SLC -> SLCV -> DLC "
             "(docs/IR.md).",
    "opt": "opt FILE.mlir [--pipeline=P] [--print-after-all] [--out FILE]: run passes on "
           "the generic text IR.",
    "emulate": "emulate MODEL [--target=tmu|FILE.toml] [-O0..-O4] [--trace T.json] [--json] "
               "[--native_fallback] [--placement=auto|symmetric|greedy|optimum|PLAN.json "
               "--plot P.png]: run the clusters on an emulated DAE machine (placed on the "
               "cores of a multi-core target: tmu8, npu); timing report.",
    "place": "place [WORKLOAD.npz] [--target=npu|FILE.toml] [--placement=auto|symmetric|"
             "greedy|optimum|PLAN.json] [--distribution=D] [--plot P.png] [--json] "
             "[--save_plan F.json]: embedding tables on a multi-core NPU (docs/PLACEMENT.md).",
}
USAGE = """usage: ember-xla COMMAND MODEL [--flags]

MODEL is a SavedModel directory, an HloModuleProto (.pb), HLO text (.hlo/.txt) or StableHLO
(.mlir text or bytecode, e.g. jax.jit(f).lower(...).as_text()).
Commands:
""" + "\n".join(f"  {v}" for v in COMMANDS.values()) + """
Run `ember-xla --helpfull` for every flag."""


def _cmd_inspect(args: list[str]) -> int:
    from ember_xla.cli.inspect_cmd import inspect

    if len(args) != 1:
        raise UsageError("inspect takes exactly one MODEL argument")
    models = load_arg(args[0], FLAGS, elided_ok=True)
    print(inspect(models, FLAGS.json))
    return 0


def _cmd_rewrite(args: list[str]) -> int:
    from ember_xla.orchestrate.rewrite_model import rewrite_all

    if len(args) != 1:
        raise UsageError("rewrite takes exactly one MODEL argument")
    if not FLAGS.out:
        raise UsageError("rewrite needs --out DIR")
    models = load_arg(args[0], FLAGS)
    rewrite_all(models, FLAGS.out, FLAGS.verify, FLAGS.seed, group=FLAGS.group_tables,
                cost_model=False if FLAGS.rewrite_all else None,
                assume_finite_tables=FLAGS.assume_finite_tables, verify_atol=FLAGS.verify_atol,
                verify_rtol=FLAGS.verify_rtol)
    return 0


def _cmd_run(args: list[str]) -> int:
    from ember_xla.cli.run_cmd import run_model

    if len(args) != 1:
        raise UsageError("run takes exactly one MODEL argument")
    model = load_arg(args[0], FLAGS, one=True)[0]
    print(run_model(model, FLAGS.inputs, FLAGS.outputs, FLAGS.seed, FLAGS.repeat))
    return 0


def _cmd_example(args: list[str]) -> int:
    from ember_xla.cli.example_cmd import run_example

    if args:
        raise UsageError("example takes no arguments")
    return run_example(FLAGS.out, FLAGS.tf, FLAGS.timing_repeats)


def _cmd_batch(args: list[str]) -> int:
    from ember_xla.cli.batch_cmd import cmd_batch

    return cmd_batch(args)


def _cmd_lower(args: list[str]) -> int:
    from ember_xla.cli.lower_cmd import lower_main

    return lower_main(args, FLAGS)


def _cmd_opt(args: list[str]) -> int:
    from ember_xla.cli.opt_cmd import opt_main

    return opt_main(args, FLAGS)


def _cmd_emulate(args: list[str]) -> int:
    from ember_xla.cli.emulate_cmd import emulate_main

    return emulate_main(args, FLAGS)


def _cmd_place(args: list[str]) -> int:
    from ember_xla.cli.place_cmd import place_main

    return place_main(args, FLAGS)


HANDLERS = {"inspect": _cmd_inspect, "rewrite": _cmd_rewrite, "run": _cmd_run,
            "example": _cmd_example, "batch": _cmd_batch, "lower": _cmd_lower,
            "opt": _cmd_opt, "emulate": _cmd_emulate, "place": _cmd_place}


def _normalize_argv(argv: list[str]) -> list[str]:
    """``-O3`` -> ``--opt_level=3``; ``--print-after-all`` -> ``--print_after_all``."""
    from ember_xla.dae_target.passes.levels import spelled_level

    out = []
    for a in argv:
        level = spelled_level(a) if a.startswith("-O") else None
        if level is not None:
            a = f"--opt_level={level}"
        elif a.startswith("--") and "-" in a[2:].partition("=")[0]:
            name, eq, val = a[2:].partition("=")
            if name.replace("-", "_") in FLAGS:
                a = "--" + name.replace("-", "_") + eq + val
        out.append(a)
    return out


def main(argv: list[str]) -> int:
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # libraries' INFO chatter stays off the terminal
    choices = ", ".join(HANDLERS)
    if len(argv) < 2:
        print(f"ember-xla: error: no command given; expected one of {choices} "
              "(ember-xla --help for usage)", file=sys.stderr)
        return USAGE_EXIT
    cmd, args = argv[1], argv[2:]
    if cmd not in HANDLERS:
        print(f"ember-xla: error: unknown command {cmd!r}; expected one of {choices} "
              "(ember-xla --help for usage)", file=sys.stderr)
        return USAGE_EXIT
    def checked() -> int:
        from ember_xla.cli.flag_ranges import check_flag_ranges

        check_flag_ranges(FLAGS)
        return HANDLERS[cmd](args)

    return guarded(checked)


MAX_FLAG_NAME = 100


def _parse_flags(argv: list[str]) -> list[str]:
    """absl's parser, with a bad flag as one error line and exit code 2 (absl: two, exit 1);
    flagfiles checked first (a FIFO or non-UTF-8 file); long values cut in the message."""
    from ember_xla.cli.flagfiles import check_flagfiles

    try:
        for a in argv[1:]:
            name = a.lstrip("-").partition("=")[0]
            if a.startswith("-") and len(name) > MAX_FLAG_NAME and name not in FLAGS:
                # absl's "did you mean" recursed once per character (RecursionError)
                raise UsageError(f"unknown flag --{name}")
        check_flagfiles(argv[1:])
        return FLAGS(argv)
    except (flags.Error, UsageError, UnicodeError, OSError) as e:
        msg = shorten(" ".join(str(e).split("\n")[0].split()))
        hint = " (ember-xla --help lists the flags)" if isinstance(e, flags.Error) else ""
        print(f"ember-xla: error: {msg}{hint}", file=sys.stderr)
        sys.exit(USAGE_EXIT)


def run() -> None:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # keep TensorFlow quiet on stderr
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no accelerator probing
    # TensorFlow (imported for its HloModuleProto schema) otherwise logs a oneDNN notice on
    # stderr at import; the CLI runs no TF kernels whose numerics the setting could change.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if any(a in ("-h", "--help", "--helpshort", "help") for a in sys.argv[1:2] + sys.argv[2:]):
        print(USAGE.replace("Run `ember-xla --helpfull` for every flag.", "Flags:"))
        print(FLAGS.module_help(__name__))
        print(FLAGS.module_help(ember_xla.batch.flags.__name__))
        print(FLAGS.module_help(ember_xla.cli.emulate_cmd.__name__))
        print(FLAGS.module_help(ember_xla.cli.place_cmd.__name__))
        print(FLAGS.module_help(ember_xla.cli.target_flag.__name__))
        sys.exit(0)
    app.run(main, argv=_normalize_argv(sys.argv), flags_parser=_parse_flags)
