"""Runs a list of ``ember-xla`` command lines in one process and writes, per command, its exit
code, stdout, stderr and the files it wrote, with timing fields and temporary paths masked:
the record that shows a restructuring left the CLI's outputs byte-identical.

``python tests/cli/golden_outputs/driver.py OUT_DIR`` writes ``OUT_DIR/<n>_<slug>.txt`` for
every command of :func:`commands`; ``record.py`` keeps them as the expected outputs and
``tests/cli/test_golden_outputs.py`` compares a fresh run against them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"
DAE_GOLDEN = HERE.parents[1] / "golden" / "dae"  # the lit tests' IR files

# Wall-clock numbers are the only outputs allowed to change from run to run.
_TIMING = [
    (re.compile(r"(time per batch: XLA:CPU )[0-9.]+( ms, rewritten )[0-9.]+( ms -> speed-up )"
                r"[0-9.]+x"), r"\1<T>\2<T>\3<R>x"),
    (re.compile(r"(mapper )[0-9.]+ s"), r"\1<T> s"),
    (re.compile(r'("mapper_seconds": )[0-9.e+-]+'), r"\1<T>"),
]


# Where the built-in example was traced from (the Python call stack JAX records): which files
# and lines call it is not what the command computes.
_STACK = [
    (re.compile(r"\n(FileNames|FunctionNames|FileLocations|StackFrames)\n(?:[0-9]+ [^\n]*\n)*"),
     r"\n\1\n<stack>\n"),
    (re.compile(r", stack_frame_id=[0-9]+"), ", stack_frame_id=<N>"),
]

# A batch job's wall-clock fields, run id and staging folders.
_BATCH = [
    (re.compile(r"(\.staging/[^/\s]+\.)[a-z0-9_]{8}"), r"\1<TMP>"),
    (re.compile(r'("(?:run_id|id)": ")[0-9a-f]{12}"'), r'\1<ID>"'),
    (re.compile(r'("(?:seconds|elapsed_s|startup_s|[^"]+\.hlo)": )[0-9.e+-]+'), r"\1<T>"),
    (re.compile(r"\b[0-9a-f]{12}\b"), "<ID>"),
    # the manifest's hashes of a model's outputs: report.json and emulate.json hold absolute
    # paths (the model's, the target file's), so their bytes depend on where the tree is
    (re.compile(r'("(?:report|emulate)\.json": ")[0-9a-f]{64}"'), r'\1<SHA>"'),
]


# Where the shipped target descriptions are: the source tree's configs/ in an editable install,
# site-packages/ember_xla/configs/ in a regular one (CI's); a batch worker started in the source
# tree may read the tree's own.
def _configs_dirs() -> list[str]:
    from ember_xla.machines.config import builtin_configs

    return [str(builtin_configs()), str(HERE.parents[2] / "configs")]


def mask(text: str, out_dir: str, batch: bool = False, traced: bool = False) -> str:
    text = text.replace(out_dir, "<OUT>").replace(str(MODELS), "<MODELS>")
    for configs in _configs_dirs():
        text = text.replace(configs, "<CONFIGS>")
    text = text.replace(str(HERE.parents[2]), "<REPO>")
    for pattern, repl in _TIMING + (_BATCH if batch else []) + (_STACK if traced else []):
        text = pattern.sub(repl, text)
    return text


def commands() -> list[list[str]]:
    """The command lines, ``{M}`` standing for the models folder, ``{G}`` for the lit tests' IR
    files and ``{O}`` for a fresh output folder per command (``{R}``: the folder the last
    ``rewrite`` wrote)."""
    cmds: list[list[str]] = [
        ["example", "--notf", "--timing_repeats=1", "--out={O}"],
        ["place", "--json"],
        ["place"],
        ["place", "--placement=greedy"],
        ["inspect", "{M}/does_not_exist.hlo"],
        ["rewrite", "{M}/example.hlo"],
        ["lower", "{M}/example.hlo", "-O9"],
        ["opt", "{G}/pass_bufferize.mlir", "--pipeline=bufferize"],
        ["opt", "{G}/pass_decouple.mlir", "--pipeline=decouple", "--print-after-all"],
        ["opt", "{G}/eb_sum_O0.mlir"],
        ["batch", "--inputs={M}/example_b4.hlo,{M}/jax_embedding_bag.hlo,{M}/jax_sort.hlo",
         "--out={O}", "--actions=rewrite,verify,emulate", "--progress=none"],
    ]
    for model in sorted(p.name for p in MODELS.glob("*.hlo")):
        m = f"{{M}}/{model}"
        cmds += [["inspect", m], ["inspect", m, "--json"],
                 ["rewrite", m, "--out={O}", "--rewrite_all"]]
        if model in _FULL:
            cmds += [["rewrite", m, "--out={O}", "--verify"],
                     ["run", m],
                     ["run", "{R}/rewritten.pb"],
                     ["lower", "{R}/rewritten.pb", "-O3"],
                     ["emulate", "{R}/rewritten.pb"],
                     ["lower", m, "-O3"],
                     ["lower", m, "-O0", "--verify"],
                     ["lower", m, "--emit=program", "--out={O}"],
                     ["lower", m, "--pipeline=vectorize{vl=8},bufferize", "--cluster=0",
                      "--print-after-all"],
                     ["emulate", m],
                     ["emulate", m, "--json", "-O1"],
                     ["emulate", m, "--target=tiny", "--native_fallback"],
                     ["emulate", m, "--target=tiny", "-O0"],
                     ["emulate", m, "--target=npu", "--placement=greedy", "--json"],
                     ["emulate", m, "--target=npu", "--placement=auto", "--native_fallback"]]
    return cmds


# Models that also go through verify, run, lower, emulate (the rest: inspect and rewrite).
_FULL = {"example.hlo", "example_b4.hlo", "jax_embedding_bag.hlo", "jax_segment_sum.hlo",
         "tf_gather_segment.hlo"}


def _files(out_dir: str, traced: bool) -> list[tuple[str, str]]:
    rows = []
    for p in sorted(Path(out_dir).rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            rel = str(p.relative_to(out_dir))
            if traced and p.suffix == ".pb":  # holds the stack frames, see _STACK
                rows.append((rel, "<HloModuleProto>"))
            elif p.suffix in (".pb", ".npz", ".png"):
                digest = hashlib.sha256(data).hexdigest()
                rows.append((rel, f"<{len(data)} bytes, sha256 {digest}>"))
            else:
                rows.append((rel, data.decode("utf-8", "replace")))
    return rows


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """What the command writes to file descriptors 1 and 2 (Python's and native code's)."""
    outs = io.StringIO(), io.StringIO()
    saved = [os.dup(1), os.dup(2)]
    files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(files[0].fileno(), 1)
    os.dup2(files[1].fileno(), 2)
    try:
        yield outs
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, f, out in zip((1, 2), files, outs, strict=True):
            os.dup2(saved[fd - 1], fd)
            os.close(saved[fd - 1])
            f.seek(0)
            out.write(f.read().decode("utf-8", "replace"))
            f.close()


def run_all(dest: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    from absl import logging

    from ember_xla.cli.main import FLAGS, _normalize_argv, _parse_flags, main

    logging.set_verbosity(logging.WARNING)
    dest.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ember_golden_")
    last_rewrite = os.path.join(work, "none")
    try:
        for n, template in enumerate(commands()):
            out_dir = os.path.join(work, f"out{n}")
            args = [a.replace("{M}", str(MODELS)).replace("{O}", out_dir)
                    .replace("{G}", str(DAE_GOLDEN))
                    .replace("{R}", last_rewrite) for a in template]
            FLAGS.unparse_flags()
            with _captured() as (stdout, stderr):
                try:
                    rc = main(_parse_flags(_normalize_argv(["ember-xla"] + args)))
                except SystemExit as e:
                    rc = e.code
            if template[0] == "rewrite" and rc == 0:
                last_rewrite = out_dir
            batch, traced = template[0] == "batch", template[0] == "example"
            files = _files(out_dir, traced) if os.path.isdir(out_dir) else []
            body = [f"$ ember-xla {' '.join(template)}", f"exit {rc}",
                    "--- stdout", mask(stdout.getvalue(), out_dir, batch),
                    "--- stderr", mask(stderr.getvalue(), out_dir, batch)]
            for rel, content in files:  # a model's own outputs keep their emulated seconds
                body += [f"--- file {rel}",
                         mask(content, out_dir, batch and not rel.startswith("models/"), traced)]
            slug = re.sub(r"[^A-Za-z0-9]+", "_", " ".join(template).replace("{M}/", ""))[:80]
            text = "\n".join(body).replace(last_rewrite, "<REWRITTEN>")
            (dest / f"{n:03d}_{slug.strip('_')}.txt").write_text(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    run_all(Path(sys.argv[1]))
