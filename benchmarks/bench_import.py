"""Benchmark: import/export cost per instruction for HLO text and HloModuleProto.

Builds synthetic modules of 1k, 10k and 100k instructions (a mix of elementwise ops,
broadcasts, reshapes, dots, reduces with a called computation, gathers with dimension numbers,
metadata on every instruction), then times, in one process:
  text  -> IR (our parser)        IR -> text (our printer)
  proto -> IR (our importer)      IR -> proto (our exporter)
and prints microseconds per instruction, and the growth from 10k to 100k (1.0 = linear).

    python benchmarks/bench_import.py [--sizes 1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from ember_xla.hlo.parser import parse_module
from ember_xla.hlo.printer import print_module
from ember_xla.hlo_import.proto import module_from_proto, module_to_proto


def synthetic_text(n: int) -> str:
    """HLO text with about ``n`` instructions in the entry computation."""
    lines = [
        f"HloModule synthetic_{n}", "",
        "add {", "  a = f32[] parameter(0)", "  b = f32[] parameter(1)",
        "  ROOT s = f32[] add(a, b)", "}", "",
        "ENTRY main {",
        "  p0 = f32[16,16]{1,0} parameter(0)",
        "  tbl = f32[64,16]{1,0} parameter(1)",
        "  ids = s32[16,1]{1,0} parameter(2)",
        "  zero = f32[] constant(0)",
    ]
    last = "p0"
    i = 0
    body = 4
    while body < n - 1:
        k = i % 6
        md = f', metadata={{op_name="jit(f)/op_{i}" source_file="model.py" source_line={i % 500}}}'
        if k == 0:
            lines.append(f"  v{i} = f32[16,16]{{1,0}} add({last}, p0){md}")
            body += 1
        elif k == 1:
            lines.append(f"  v{i} = f32[16,16]{{1,0}} multiply({last}, {last}){md}")
            body += 1
        elif k == 2:
            lines.append(f"  r{i} = f32[16]{{0}} reduce({last}, zero), dimensions={{1}}, "
                         f"to_apply=add{md}")
            lines.append(f"  v{i} = f32[16,16]{{1,0}} broadcast(r{i}), dimensions={{0}}{md}")
            body += 2
        elif k == 3:
            lines.append(f"  v{i} = f32[16,16]{{1,0}} dot({last}, p0), lhs_contracting_dims={{1}}, "
                         f"rhs_contracting_dims={{0}}{md}")
            body += 1
        elif k == 4:
            lines.append(f"  v{i} = f32[16,16]{{1,0}} gather(tbl, ids), offset_dims={{1}}, "
                         "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
                         f"slice_sizes={{1,16}}{md}")
            body += 1
        else:
            lines.append(f"  t{i} = f32[256]{{0}} reshape({last}){md}")
            lines.append(f"  v{i} = f32[16,16]{{1,0}} reshape(t{i}){md}")
            body += 2
        last = f"v{i}"
        i += 1
    lines.append(f"  ROOT out = f32[16,16]{{1,0}} tanh({last})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    module_to_proto(parse_module(synthetic_text(50)))  # warm up: imports TF's proto schema
    rows = []
    print(f"{'instructions':>12} {'text->IR':>10} {'IR->text':>10} {'proto->IR':>10} "
          f"{'IR->proto':>10} {'total s':>8}   (us per instruction; total = all four)")
    for n in [int(x) for x in args.sizes.split(",")]:
        text = synthetic_text(n)
        t_parse, m = best(lambda text=text: parse_module(text), args.repeat)
        count = sum(len(g.ops) for g in m.graphs)
        t_print, _ = best(lambda m=m: print_module(m), args.repeat)
        t_export, proto = best(lambda m=m: module_to_proto(m), args.repeat)
        t_import, _ = best(lambda proto=proto: module_from_proto(proto), args.repeat)
        total = t_parse + t_print + t_import + t_export
        per = [1e6 * t / count for t in (t_parse, t_print, t_import, t_export)]
        rows.append((count, per, total))
        print(f"{count:>12} {per[0]:>10.2f} {per[1]:>10.2f} {per[2]:>10.2f} {per[3]:>10.2f} "
              f"{total:>8.2f}")
    if len(rows) >= 2:
        (n1, p1, _), (n2, p2, _) = rows[-2], rows[-1]
        growth = [b / a for a, b in zip(p1, p2, strict=True)]
        print(f"per-instruction cost ratio {n2} vs {n1} (1.0 = linear): "
              + ", ".join(f"{g:.2f}" for g in growth))


if __name__ == "__main__":
    main()
