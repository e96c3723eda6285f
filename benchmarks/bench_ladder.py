"""Ember's optimization ladder on the emulated DAE target: per workload (``ladder_workloads``:
DLRM bags with MLPerf pooling factors, GNN aggregation on a power-law graph, a sparse-attention
gather of 1-8 rows per block) the emulated cycles at -O0..-O4 and the speedup of each step next
to Ember's published ladder; the same for the backward of two training steps
(``dlrm_train``: the DLRM bags' SGD step, the gradient fused into ``ember.sparse_sgd``;
``adagrad_train`` / ``rowwise_train``: the same step with optax's Adagrad / rowwise Adagrad,
``ember.sparse_adagrad`` / ``ember.sparse_rowwise_adagrad``; ``gnn_train``: the gradient of
the GNN aggregation, ``ember.scatter_grad``), the backward
clusters' cycles beside the forward ones of the same step; the compiled / hand-written ratio
(the DLRM bags at -O3 vs ``dae_target/handwritten.py``) next to Ember's 95-100%, and the
emulator's speed in queue tokens per second (control tokens + data-queue entries; Python
reference and C++).

Every cluster's emulated outputs must equal its native kernel's bit for bit on the same
values (else the run stops). Cycles are exact model outputs (deterministic, seeded inputs);
the emulator speeds are wall-clock medians on a shared machine, indicative only. Writes
``OUT/ladder.png`` (the chart), ``OUT/ladder.json`` and ``OUT/trace_o3.json`` (a sample
Perfetto trace: the first DLRM cluster at -O3).

    python benchmarks/bench_ladder.py                       # tmu.toml, default sizes
    python benchmarks/bench_ladder.py --scale 0.25 --out /tmp/ladder
    python benchmarks/bench_ladder.py --workloads dlrm_train,adagrad_train,rowwise_train,gnn_train
    python benchmarks/bench_ladder.py --out /tmp/ladder --replot   # redraw the chart only
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ladder_workloads as W  # noqa: E402

LEVELS = (0, 1, 2, 3, 4)
EMBER = {"O0->O1": (3.96, 6.15, 5.09, "vectorization"),
         "O1->O2": (1.34, 2.23, 1.67, "bufferization"),
         "O2->O3": (1.12, 1.58, 1.29, "queue alignment"),
         "O0->O3": (6.5, 21.2, 10.9, "total")}
HANDWRITTEN_EMBER = "95.2-100% (mean ~98%)"


def prepare(name: str, scale: float) -> tuple[Any, Any]:
    """(rewritten module, captured cluster values) of one workload."""
    import jax

    from ember_xla.emulator.capture import capture
    from ember_xla.hlo_import.jax_source import from_jax
    from ember_xla.rewrites.pipeline import rewrite_module

    size = {"dlrm": ("batch", 32), "gnn": ("nodes", 2000), "attention": ("blocks", 1024),
            "dlrm_train": ("batch", 32), "gnn_train": ("nodes", 2000),
            "adagrad_train": ("batch", 32), "rowwise_train": ("batch", 32)}[name]
    fn, args = W.WORKLOADS[name](max(1, int(size[1] * scale)))
    model = from_jax(fn, *args)
    rewritten = rewrite_module(model.module, cost_model=False).module
    return rewritten, capture(rewritten, jax.tree.leaves(args))


def emulate_clusters(compiled: list, cap: Any, target: Any) -> dict[str, Any]:
    """Run each compiled cluster on the Python reference (functional run, then the timing
    model), time the same trace on the C++ timing core, and run the whole C++ emulator
    (functional + timing: ``executor_cc.emulate_program``); cycles must be equal and the outputs
    the native kernel's; sum the cycles (clusters run one after the other)."""
    from ember_xla.custom_calls import TARGETS
    from ember_xla.emulator.executor_cc import emulate_program
    from ember_xla.emulator.reference import run_program
    from ember_xla.emulator.timing import simulate
    from ember_xla.emulator.timing_cc import simulate_fast
    from ember_xla.runtime.compare import compare_outputs

    total = {"cycles": 0.0, "tokens": 0, "run_s": 0.0, "timing_py_s": 0.0, "timing_cpp_s": 0.0,
             "cpp_full_s": 0.0, "clusters": [], "by_pass": {"forward": 0.0, "backward": 0.0}}
    for c in compiled:
        if c.refused:
            raise SystemExit(f"cluster {c.name}: refused by the lowering: {c.refused}")
        t0 = time.perf_counter()
        outs, trace = run_program(c.program, cap.operands[c.name])
        t1 = time.perf_counter()
        rep = simulate(target, trace)
        t2 = time.perf_counter()
        fast = simulate_fast(target, trace)
        t3 = time.perf_counter()
        cpp_outs, cpp = emulate_program(c.program, cap.operands[c.name], target)
        t4 = time.perf_counter()
        if not fast.cycles == cpp.cycles == rep.cycles:
            raise SystemExit(f"cluster {c.name}: C++ {fast.cycles}, {cpp.cycles} != Python "
                             f"{rep.cycles}")
        if compare_outputs(cap.results[c.name], cpp_outs)["bitwise_equal"] is not True:
            raise SystemExit(f"cluster {c.name}: the C++ emulator's outputs differ")
        total["cpp_full_s"] += t4 - t3
        total["run_s"] += t1 - t0
        total["timing_py_s"] += t2 - t1
        total["timing_cpp_s"] += t3 - t2
        v = compare_outputs(cap.results[c.name], [np.asarray(o) for o in outs])
        if not v["bitwise_equal"]:
            raise SystemExit(f"cluster {c.name}: emulated outputs differ from the native "
                             f"kernel (max |diff| {v['max_abs_diff']:.3g})")
        total["cycles"] += rep.cycles
        total["by_pass"][TARGETS[c.kind].direction] += rep.cycles
        total["tokens"] += rep.tokens + rep.entries
        total["clusters"].append({"name": c.name, "pass": TARGETS[c.kind].direction,
                                  **rep.as_dict()})
    return total


def handwritten_ratio(compiled_o3: list, cap: Any, target: Any, o3_cycles: float
                      ) -> dict[str, Any]:
    """The hand-written DLC sum bag on every DLRM table vs the compiled -O3 programs."""
    from ember_xla.dae_target.handwritten import sum_bag_dlc
    from ember_xla.orchestrate.compile_clusters import compile_program
    from ember_xla.orchestrate.emulate_model import run_reference

    cycles = 0.0
    for c in compiled_o3:
        table, ids, offsets = cap.operands[c.name]
        want = cap.results[c.name][0]
        program, _ = compile_program(sum_bag_dlc(vl=8, id_bits=8 * ids.itemsize), target,
                                     [offsets.shape, ids.shape, table.shape], [want.shape])
        outs, rep = run_reference(program, [offsets.astype(np.int64), ids, table], target)
        if not np.array_equal(outs[0], want):
            raise SystemExit(f"hand-written program differs from the kernel on {c.name}")
        cycles += rep.cycles
    return {"handwritten_cycles": cycles, "compiled_o3_cycles": o3_cycles,
            "compiled_over_handwritten_speed": cycles / o3_cycles}


def cpp_speed() -> dict[str, Any] | None:
    try:
        from bench_emulator import measure_speed
    except ImportError as e:
        print(f"C++ emulator speed: not measured ({e})", file=sys.stderr)
        return None
    return measure_speed()


def sample_trace(compiled: Any, cap: Any, target: Any, path: Path) -> int:
    from ember_xla.emulator.perfetto import TracedRun, write_trace
    from ember_xla.emulator.recorder import EventRecorder
    from ember_xla.orchestrate.emulate_model import run_reference

    rec = EventRecorder()
    _, rep = run_reference(compiled.program, cap.operands[compiled.name], target, rec)
    return write_trace(str(path), [TracedRun(f"%{compiled.name} -O3", target, rec, rep.cycles)])


def chart(results: dict[str, dict[int, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(LEVELS)
    names = list(results)
    for j, lv in enumerate(LEVELS):
        ys = [results[n][0] / results[n][lv] for n in names]
        ax.bar([i + (j - 2) * width for i in range(len(names))], ys, width, label=f"-O{lv}")
    ax.axhline(EMBER["O0->O3"][2], color="k", ls="--", lw=1,
               label=f"Ember O0->O3 geomean {EMBER['O0->O3'][2]}x")
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("speedup over -O0 (emulated cycles)")
    ax.set_title("Ember's ladder on the emulated TMU-like target")
    ax.set_ylim(top=max(max(results[n][0] / results[n][lv] for lv in LEVELS) for n in names)
                * 2.5)
    ax.legend(fontsize=8, ncol=3, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def forward_ladder(cycles: dict[str, dict[int, float]], target: Any) -> None:
    """The forward workloads' cycles per level, each step's speedup and Ember's ladder."""
    print(f"\nemulated cycles on {target.name} ({target.source}), speedup of each step "
          "(Ember's published range, geomean)")
    print(f"| workload | {' | '.join(f'-O{lv} cycles' for lv in LEVELS)} | O0->O1 | O1->O2 "
          "| O2->O3 | O3->O4 | O0->O3 |")
    print("|---" * (len(LEVELS) + 6) + "|")
    steps: dict[str, list[float]] = {k: [] for k in ("O0->O1", "O1->O2", "O2->O3", "O0->O3")}
    for name, c in cycles.items():
        s = {"O0->O1": c[0] / c[1], "O1->O2": c[1] / c[2], "O2->O3": c[2] / c[3],
             "O3->O4": c[3] / c[4], "O0->O3": c[0] / c[3]}
        for k in steps:
            steps[k].append(s[k])
        print(f"| {name} | {' | '.join(f'{c[lv]:,.0f}' for lv in LEVELS)} | "
              + " | ".join(f"{s[k]:.2f}x" for k in s) + " |")
    print("| Ember (range; geomean) | " + " | " * (len(LEVELS) - 1) + " | "
          + " | ".join(f"{EMBER[k][0]}-{EMBER[k][1]}x; {EMBER[k][2]}x" if k in EMBER else "-"
                       for k in ("O0->O1", "O1->O2", "O2->O3", "O3->O4", "O0->O3")) + " |")
    print("geomean here: " + ", ".join(f"{k} {geomean(v):.2f}x" for k, v in steps.items()))


def backward_ladder(backward: dict[str, dict[int, float]],
                    forward: dict[str, dict[int, float]]) -> None:
    """The backward clusters' cycles per level and the speedup of each step, beside the
    forward clusters' cycles of the same training step."""
    print("\nthe backward (gradient and fused update) of training steps: emulated cycles of "
          "the backward clusters (the step's forward clusters beside them)")
    print(f"| step | pass | {' | '.join(f'-O{lv} cycles' for lv in LEVELS)} | O0->O1 | "
          "O1->O2 | O2->O3 | O3->O4 | O0->O3 |")
    print("|---" * (len(LEVELS) + 7) + "|")
    for name in backward:
        for what, c in (("backward", backward[name]), ("forward", forward[name])):
            if not c[0]:
                continue
            s = [c[0] / c[1], c[1] / c[2], c[2] / c[3], c[3] / c[4], c[0] / c[3]]
            print(f"| {name} | {what} | {' | '.join(f'{c[lv]:,.0f}' for lv in LEVELS)} | "
                  + " | ".join(f"{x:.2f}x" for x in s) + " |")


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main() -> None:
    from ember_xla.machines.config import load_target
    from ember_xla.orchestrate.compile_clusters import compile_clusters

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="tmu")
    ap.add_argument("--scale", type=float, default=1.0, help="workload size factor")
    ap.add_argument("--workloads", default="dlrm,gnn,attention,dlrm_train,gnn_train")
    ap.add_argument("--out", default="bench_ladder_out")
    ap.add_argument("--replot", action="store_true", help="only redraw OUT/ladder.png from "
                    "OUT/ladder.json")
    a = ap.parse_args()
    if a.replot:
        data = json.loads((Path(a.out) / "ladder.json").read_text())
        chart({n: {int(k): v for k, v in c.items()} for n, c in data["cycles"].items()},
              Path(a.out) / "ladder.png")
        return
    target = load_target(a.target)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cycles: dict[str, dict[int, float]] = {}
    detail: dict[str, Any] = {}
    speeds: dict[str, list[float]] = {"functional": [], "timing_py": [], "timing_cpp": [],
                                      "cpp_full": []}
    backward: dict[str, dict[int, float]] = {}
    forward_of_train: dict[str, dict[int, float]] = {}
    for name in a.workloads.split(","):
        rewritten, cap = prepare(name, a.scale)
        train = name.endswith("_train")
        cycles_of = forward_of_train if train else cycles
        cycles_of[name], detail[name] = {}, {}
        if train:
            backward[name] = {}
        for lv in LEVELS:
            compiled = compile_clusters(rewritten, target, lv)
            res = emulate_clusters(compiled, cap, target)
            cycles_of[name][lv] = res["by_pass"]["forward"]
            if train:
                backward[name][lv] = res["by_pass"]["backward"]
            detail[name][f"O{lv}"] = res
            for k, key in (("functional", "run_s"), ("timing_py", "timing_py_s"),
                           ("timing_cpp", "timing_cpp_s"), ("cpp_full", "cpp_full_s")):
                speeds[k].append(res["tokens"] / max(res[key], 1e-9))
            print(f"{name} -O{lv}: {res['cycles']:,.0f} cycles, {res['tokens']:,} queue tokens, "
                  f"bound: {sorted({c['bound'] for c in res['clusters']})}", file=sys.stderr)
            if name == "dlrm" and lv == 3:
                detail[name]["handwritten"] = handwritten_ratio(compiled, cap, target,
                                                                res["cycles"])
                n = sample_trace(compiled[0], cap, target, out / "trace_o3.json")
                print(f"sample trace: {n} events -> {out / 'trace_o3.json'}", file=sys.stderr)
    if cycles:
        forward_ladder(cycles, target)
    if backward:
        backward_ladder(backward, forward_of_train)
    if "dlrm" in detail:
        h = detail["dlrm"]["handwritten"]
        print(f"compiled -O3 / hand-written (DLRM bags): {h['compiled_o3_cycles']:,.0f} vs "
              f"{h['handwritten_cycles']:,.0f} cycles -> compiled runs at "
              f"{100 * h['compiled_over_handwritten_speed']:.1f}% of the hand-written speed "
              f"(Ember: {HANDWRITTEN_EMBER})")
    py = {k: statistics.median(v) for k, v in speeds.items()}
    print(f"emulator speed on these programs' traces, medians over {len(speeds['functional'])} "
          f"runs, queue tokens/s: Python functional run {py['functional']:,.0f}, Python "
          f"timing model {py['timing_py']:,.0f}, C++ timing core {py['timing_cpp']:,.0f} "
          f"(trace handed over from Python), whole C++ emulator (functional + timing) "
          f"{py['cpp_full']:,.0f}; same cycles and outputs")
    cpp = cpp_speed()
    if cpp is not None:
        print(f"emulator speed, bench_emulator.measure_speed() (synthetic trace, "
              f"{cpp['lookups']:,} lookups, {cpp['granularity']} entries): C++ "
              f"{cpp['cpp_tokens_per_s']:,.0f} tokens/s, Python timing model "
              f"{cpp['python_tokens_per_s']:,.0f} tokens/s")
    if cycles:
        chart(cycles, out / "ladder.png")
    (out / "ladder.json").write_text(json.dumps(
        {"target": target.name, "cycles": cycles, "backward_cycles": backward,
         "train_forward_cycles": forward_of_train, "detail": detail, "tokens_per_s": py,
         "cpp": cpp}, indent=1, default=float))
    print(f"chart: {out / 'ladder.png'}; data: {out / 'ladder.json'}")


if __name__ == "__main__":
    main()
