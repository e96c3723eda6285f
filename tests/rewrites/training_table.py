"""Print the training-step corpus's table (``python tests/rewrites/training_table.py``): per
step, forward clusters found / expected, backward entries found / expected (rewritten gradient
clusters and the backward near-misses kept in XLA), the fused optimizer of each or the reason
it is refused, and whether the rewritten step's outputs (loss, updated parameters, optimizer
state) equal the original's on XLA:CPU with ``xla_allow_excess_precision`` true and false over
the random, edge and out-of-range inputs. The expectations are each step's record
(training_corpus.TrainStep); tests/rewrites/test_training_models.py holds the rewrite to the
same record."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("EMBER_XLA_COST_MODEL", "off")  # as the tests run: every cluster taken

import training_models as tm  # noqa: E402

CASES = ("random", "edge", "oob")


def _backward(result) -> list[dict]:
    return ([c for c in result.clusters if c.get("pass") == "backward"]
            + [n for n in result.near_misses if n.get("pass") == "backward"])


def _short(reason: str, n: int = 70) -> str:
    return reason if len(reason) <= n else reason[:n - 3] + "..."


def _equal(got: list[np.ndarray], want: list[np.ndarray], tol: float) -> bool:
    for a, b in zip(got, want, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if tol == 0.0:
            if a.tobytes() != b.tobytes():
                return False
        elif not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol,
                             equal_nan=True):
            return False
    return True


def row(name: str) -> list[str]:
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.execute import run_module

    s = tm.STEPS[name]
    original = tm.export(name)[0].module
    r = rewrite_module(original)
    fwd = [c for c in r.clusters if c.get("pass", "forward") == "forward"]
    bwd = _backward(r)
    fused = ", ".join(e.get("optimizer") or "refused: " + _short(
        e.get("optimizer_reason") or e.get("reason", "")) for e in bwd) or "-"
    equal = []
    for excess in (True, False):
        ok = all(_equal(run_module(r.module, tm.inputs(name, c),
                                   {"xla_allow_excess_precision": excess}),
                        run_module(original, tm.inputs(name, c),
                                   {"xla_allow_excess_precision": excess}), s.tolerance)
                 for c in CASES)
        equal.append(("bit-equal" if s.tolerance == 0 else f"within {s.tolerance:g}")
                     if ok else "DIFFERS")
    want_opt = ", ".join(o or "refused" for o in s.backward) or "-"
    return [name, f"{len(fwd)} / {len(s.forward)}", f"{len(bwd)} / {len(s.backward)}",
            want_opt, fused, *equal]


def main() -> None:
    head = ["step", "forward found / expected", "backward found / expected",
            "expected optimizer", "fused optimizer (or why not)", "equal, excess precision on",
            "equal, off"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in sorted(tm.STEPS):
        print("| " + " | ".join(row(name)) + " |", flush=True)


if __name__ == "__main__":
    main()
