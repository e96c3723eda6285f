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

COMMANDS = {
    "inspect": "inspect MODEL: entry signature, computations, opcode counts, gathers/scatters.",
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


HANDLERS = {"inspect": _cmd_inspect}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(USAGE, file=sys.stderr)
        return USAGE_EXIT
    cmd, args = argv[1], argv[2:]
    if cmd not in HANDLERS:
        print(f"ember-xla: error: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
        return USAGE_EXIT
    return guarded(lambda: HANDLERS[cmd](args))


def run() -> None:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # keep TensorFlow quiet on stderr
    if any(a in ("-h", "--help", "--helpshort", "help") for a in sys.argv[1:2] + sys.argv[2:]):
        print(USAGE.replace("Run `ember-xla --helpfull` for every flag.", "Flags:"))
        print(FLAGS.module_help(__name__))
        sys.exit(0)
    app.run(main, argv=sys.argv)
