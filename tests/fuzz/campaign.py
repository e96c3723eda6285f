"""The fuzz campaign: mutate the fixture corpus (HLO text and the protos made from it), run
``inspect``, ``rewrite`` and ``run`` through the console-script entry point, and check each
outcome: exit 0 with valid output, or exit 2 with exactly one stderr line naming the problem;
never a traceback, an internal error, a signal, a hang, or a mixed/partial output folder, and
no staging folder left next to it. A share of the cases (``ENV_WEIGHTS``) is about the
environment instead (``env_cases.py``): special files, symlinked/immutable outputs, stale
staging, SIGKILL of batch parents and workers.

    python tests/fuzz/campaign.py --cases 10000 --seed 1     # the slow run of docs/RELIABILITY.md
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import env_cases  # noqa: E402
from harness import ForkRunner, Outcome  # noqa: E402
from mutate import mutate_bytes, mutate_text  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "rewrites" / "fixtures"
OUTPUTS = ["report.json", "rewritten.hlo", "rewritten.pb"]
ENV = {"EMBER_XLA_MAX_RUN_BYTES": str(64 << 20)}  # `run` refuses inputs above 64 MiB here
ENV_WEIGHTS = {"special": 0.05, "symlinked": 0.02, "immutable": 0.02, "stale": 0.02,
               "batch": 0.003}  # share of all cases; the rest are mutations


def seeds() -> list[tuple[str, bytes]]:
    from ember_xla.hlo.parser import parse_module
    from ember_xla.hlo_import.proto import module_to_proto

    out = []
    for p in sorted(FIXTURES.glob("*.hlo")):
        text = p.read_text()
        if "{...}" in text:  # elided constants: not a complete module
            continue
        out.append((p.stem + ".hlo", text.encode()))
        out.append((p.stem + ".pb", module_to_proto(parse_module(text, str(p)))))
    return out


def snapshot(folder: Path) -> dict[str, bytes] | None:
    if not folder.exists():
        return None
    return {f: (folder / f).read_bytes() for f in sorted(os.listdir(folder))}


def judge(o: Outcome, cmd: str, out_dir: Path | None, before: dict | None) -> str | None:
    """None if the outcome is acceptable, else the kind of failure."""
    if o.hung:
        return "hang"
    if o.signal is not None:
        return f"signal {o.signal}"
    if "Traceback" in o.stderr:
        return "traceback"
    if o.code == 2:
        lines = o.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("ember-xla: error: "):
            return "not one error line"
    elif o.code != 0:
        return f"exit {o.code}"
    if cmd == "rewrite" and out_dir is not None:
        after = snapshot(out_dir)
        if o.code == 0:
            if after is None or sorted(after) != OUTPUTS:
                return "partial output folder"
            json.loads(after["report.json"])
        elif after != before:
            return "output folder changed on error"
        left = [n for n in os.listdir(out_dir.parent) if n.startswith(f".{out_dir.name}.")]
        if left:
            return f"staging left: {left}"
    return None


def env_case(rng: random.Random, runner: ForkRunner, work: Path, old: Path,
             batch: bool) -> env_cases.Result | None:
    """One environment case (None: its class is not available here)."""
    fixtures = sorted(p for p in FIXTURES.glob("*.hlo") if "{...}" not in p.read_text())
    model = rng.choice(fixtures)
    weights = {k: v for k, v in ENV_WEIGHTS.items() if batch or k != "batch"}
    kind = rng.choices(list(weights), list(weights.values()))[0]
    if kind == "special":
        return env_cases.special_file(rng, runner, work, model)
    if kind == "symlinked":
        return env_cases.symlinked_out(rng, runner, work, model, old, snapshot)
    if kind == "immutable":
        return env_cases.immutable_out(rng, runner, work, model, old, snapshot)
    if kind == "stale":
        return env_cases.stale_staging(rng, runner, work, model)
    return env_cases.batch_kill(rng, work, fixtures)


def run_campaign(cases: int, seed: int, budget_s: float | None = None,
                 runner: ForkRunner | None = None, log=print, progress: int = 0,
                 env: bool = True, batch: bool = True) -> dict:
    runner = runner or ForkRunner()
    rng = random.Random(seed)
    corpus = seeds()
    work = Path(runner.tmp)
    old = work / "old"
    first = runner.run(["rewrite", str(FIXTURES / corpus[0][0]), "--out", str(old)])
    assert first.code == 0, first.stderr
    old_files = snapshot(old)
    stats: collections.Counter = collections.Counter()
    failures: list[dict] = []
    t0 = time.monotonic()
    for _ in range(cases):
        if budget_s is not None and time.monotonic() - t0 > budget_s:
            break
        if env and rng.random() < sum(ENV_WEIGHTS.values()):
            res = env_case(rng, runner, work, old, batch)
            if res is None:
                continue
            kind, why, argv, stderr = res
            stats["cases"] += 1
            stats[kind] += 1
            if why:
                stats[why.split(":")[0]] += 1
                failures.append({"why": why, "argv": argv, "input": kind,
                                 "stderr": stderr[-600:]})
                log(f"FAIL {why}: {kind} {argv}\n{stderr[-600:]}")
            continue
        name, data = corpus[rng.randrange(len(corpus))]
        if name.endswith(".hlo"):
            bad = mutate_text(data.decode(), rng).encode()
        else:
            bad = mutate_bytes(data, rng)
        path = work / f"case{name[name.rfind('.'):]}"
        path.write_bytes(bad)
        cmd = rng.choices(["inspect", "rewrite", "run"], [4, 5, 1])[0]
        argv = [cmd, str(path)]
        out_dir, before = None, None
        if cmd == "rewrite":
            out_dir = work / "outdir"
            shutil.rmtree(out_dir, ignore_errors=True)
            if rng.random() < 0.5:
                shutil.copytree(old, out_dir)
            before = snapshot(out_dir)
            argv += ["--out", str(out_dir)]
        o = runner.run(argv, timeout=120, env=ENV)
        stats["cases"] += 1
        if progress and stats["cases"] % progress == 0:
            log(f"progress: {dict(stats)} after {time.monotonic() - t0:.0f} s")
        stats[f"{cmd} exit {o.code}"] += 1
        why = judge(o, cmd, out_dir, before)
        if why:
            stats[why] += 1
            keep = work / f"fail{len(failures)}{path.suffix}"
            keep.write_bytes(bad)
            failures.append({"why": why, "argv": argv, "input": str(keep),
                             "stderr": o.stderr[-600:]})
            log(f"FAIL {why}: {argv} -> {keep}\n{o.stderr[-600:]}")
    stats["seconds"] = round(time.monotonic() - t0)
    assert old_files is not None
    return {"stats": dict(stats), "failures": failures}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", type=float, default=None, help="seconds")
    ap.add_argument("--no_env", action="store_true", help="mutation cases only")
    ap.add_argument("--no_batch", action="store_true", help="no SIGKILL-of-batch cases")
    a = ap.parse_args()
    res = run_campaign(a.cases, a.seed, a.budget,
                       log=lambda m: print(m, flush=True), progress=250,
                       env=not a.no_env, batch=not a.no_batch)
    print(json.dumps(res["stats"], indent=1, sort_keys=True))
    print(f"{len(res['failures'])} failures")
    print("RESULT " + json.dumps(res))


if __name__ == "__main__":
    main()
