"""lit configuration of the golden tests of the Ember levels (``*.mlir`` with RUN/CHECK lines,
checked by the ``filecheck`` pip package: no LLVM needed). Run them with
``lit tests/golden/dae`` or through pytest (tests/golden/dae/test_lit_golden.py).

Substitutions: ``ember-xla`` is the console script next to the Python running lit (else
``python -c 'from ember_xla.cli import run; run()'``), ``filecheck`` the one next to it;
``EMBER_XLA_CMD`` / ``FILECHECK_CMD`` override them. Output (``%t``) goes to a temporary folder
(``EMBER_LIT_OUT`` overrides), never into the source tree."""

import os
import shutil
import sys
import tempfile

import lit.formats

config = globals()["config"]  # lit injects the TestingConfig as a global
config.name = "ember-xla-dae"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.environ.get("EMBER_LIT_OUT") or os.path.join(
    tempfile.gettempdir(), "ember-xla-lit-" + str(os.getuid()))

bindir = os.path.dirname(sys.executable)


def _tool(env: str, name: str, fallback: str) -> str:
    if os.environ.get(env):
        return os.environ[env]
    here = os.path.join(bindir, name)
    if os.path.exists(here):
        return here
    return shutil.which(name) or fallback


ember = _tool("EMBER_XLA_CMD", "ember-xla",
              f"'{sys.executable}' -c 'from ember_xla.cli import run; run()'")
filecheck = _tool("FILECHECK_CMD", "filecheck", f"'{sys.executable}' -m filecheck")
if os.environ.get("PYTHONPATH"):
    # lit's builtin diff rewrites PYTHONPATH in the shared shell environment of a test, so the
    # ember-xla commands after it would import another ember_xla: pin it per command
    ember = f"env 'PYTHONPATH={os.environ['PYTHONPATH']}' {ember}"
config.substitutions.append((r"(?<![\w/.-])ember-xla(?![\w.-])", ember))
config.substitutions.append((r"(?<![\w/.-])filecheck(?![\w.-])", filecheck))

for var in ("PYTHONPATH", "EMBER_XLA_NATIVE_LIBRARY", "HOME", "PATH", "TMPDIR",
            "EMBER_XLA_NUM_THREADS", "EMBER_XLA_ISA", "EMBER_XLA_POOL"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["TF_CPP_MIN_LOG_LEVEL"] = "3"
config.environment["JAX_PLATFORMS"] = "cpu"
