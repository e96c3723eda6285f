"""Entry point of ``ember-xla``: parses absl flags, dispatches the sub-command."""

from __future__ import annotations

import sys

from absl import app, flags

from ember_xla.cli.errors import USAGE_EXIT, UsageError, guarded

FLAGS = flags.FLAGS
flags.DEFINE_bool("json", False, "inspect: print the summary as JSON.")
flags.DEFINE_string("signature", None, "SavedModel input: the serving signature to use "
                    "(default: every signature for inspect, the only one otherwise).")
flags.DEFINE_integer("unknown_dim", 8, "SavedModel input: size given to unknown (None) "
                     "dimensions of a signature.", lower_bound=1)

flags.DEFINE_string("out", None, "rewrite: output folder for rewritten.pb, rewritten.hlo and "
                    "report.json (created if missing; files are replaced atomically).")
flags.DEFINE_bool("verify", False, "rewrite: run original and rewritten module on XLA:CPU on "
                  "random valid inputs and report the largest difference.")
flags.DEFINE_bool("group_tables", False, "rewrite: batch independent segment reductions that "
                  "share attributes into one table-batched call (FBGEMM TBE-style); off by "
                  "default: separate calls measured faster on XLA:CPU (docs/BENCHMARKS.md).")
flags.DEFINE_integer("seed", 0, "rewrite/run: seed of the random inputs.")
flags.DEFINE_string("inputs", None, "run: .npz with one array per entry parameter (keys: "
                    "parameter names or arr_0, arr_1, ... as np.savez writes them).")
flags.DEFINE_string("outputs", None, "run: write the outputs to this .npz.")
flags.DEFINE_integer("repeat", 0, "run: also time this many runs and print the median.",
                     lower_bound=0)
flags.DEFINE_bool("tf", True, "example: also export, rewrite and verify the TensorFlow version.")
flags.DEFINE_integer("timing_repeats", 10, "example: timed runs per module.", lower_bound=1)

COMMANDS = {
    "inspect": "inspect MODEL: entry signature, computations, opcode counts, gathers/scatters.",
    "rewrite": "rewrite MODEL --out DIR [--verify]: embedding clusters -> ember custom-calls.",
    "run": "run MODEL [--inputs X.npz] [--outputs Y.npz] [--repeat N]: execute on XLA:CPU.",
    "example": "example [--out DIR] [--notf]: export, rewrite, verify and time the built-in "
               "DLRM-style model.",
}
USAGE = """usage: ember-xla COMMAND MODEL [--flags]

MODEL is a SavedModel directory, an HloModuleProto (.pb) or HLO text (.hlo/.txt).
Commands:
""" + "\n".join(f"  {v}" for v in COMMANDS.values()) + """
Run `ember-xla --helpfull` for every flag."""


def _cmd_inspect(args: list[str]) -> int:
    from ember_xla.cli.inspect_cmd import inspect
    from ember_xla.hlo_import.load import load_models

    if len(args) != 1:
        raise UsageError("inspect takes exactly one MODEL argument")
    models = load_models(args[0], FLAGS.signature, FLAGS.unknown_dim)
    print(inspect(models, FLAGS.json))
    return 0


def _cmd_rewrite(args: list[str]) -> int:
    from ember_xla.cli.rewrite_cmd import rewrite_all
    from ember_xla.hlo_import.load import load_models

    if len(args) != 1:
        raise UsageError("rewrite takes exactly one MODEL argument")
    if not FLAGS.out:
        raise UsageError("rewrite needs --out DIR")
    models = load_models(args[0], FLAGS.signature, FLAGS.unknown_dim)
    rewrite_all(models, FLAGS.out, FLAGS.verify, FLAGS.seed, group=FLAGS.group_tables)
    return 0


def _cmd_run(args: list[str]) -> int:
    from ember_xla.cli.run_cmd import run_model
    from ember_xla.hlo_import.load import load_model

    if len(args) != 1:
        raise UsageError("run takes exactly one MODEL argument")
    model = load_model(args[0], FLAGS.signature, FLAGS.unknown_dim)
    print(run_model(model, FLAGS.inputs, FLAGS.outputs, FLAGS.seed, FLAGS.repeat))
    return 0


def _cmd_example(args: list[str]) -> int:
    from ember_xla.cli.example_cmd import run_example

    if args:
        raise UsageError("example takes no arguments")
    return run_example(FLAGS.out, FLAGS.tf, FLAGS.timing_repeats)


HANDLERS = {"inspect": _cmd_inspect, "rewrite": _cmd_rewrite, "run": _cmd_run,
            "example": _cmd_example}


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
    return guarded(lambda: HANDLERS[cmd](args))


def _parse_flags(argv: list[str]) -> list[str]:
    """absl's parser, with a bad flag as one error line and exit code 2 (absl: two, exit 1)."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        msg = " ".join(str(e).split("\n")[0].split())
        print(f"ember-xla: error: {msg} (ember-xla --help lists the flags)", file=sys.stderr)
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
        sys.exit(0)
    app.run(main, argv=sys.argv, flags_parser=_parse_flags)
