"""Where a training step's time goes on XLA:CPU: the step run a few times under
``jax.profiler.trace``, and the XLA:CPU runtime's own trace events (one per executed thunk,
named after its HLO instruction, plus the runtime's output allocation) summed per part of the
step. Thunks that XLA runs concurrently on its pool are each counted whole, so the parts may add
up to more than the wall time; what the parts leave of the wall time is dispatch and waiting."""

from __future__ import annotations

import glob
import tempfile
import time
from collections.abc import Callable

#: Events of the runtime that are not thunks (their time is inside the thunks' or the wall's).
RUNTIME = ("ThunkExecutor", "ThreadpoolListener", "CommonPjRt", "PjitFunction", "Wait for",
           "Handle input", "ParseArguments", "PythonRefManager", "end: ", "$")
ALLOCATE = "AllocateOutputBuffersWithInputReuse"
#: The calling thread waiting for the thunks it handed to XLA's pool (wall time, not work).
WAIT = "ThunkExecutor::Execute (wait for completion)"


def part_of(name: str, calls: dict[str, str]) -> str | None:
    """The part of the step an event belongs to, or None for runtime bookkeeping; ``calls``
    maps the names of the compiled module's ember custom-calls to their targets."""
    if name == ALLOCATE:
        return "output allocation"
    if name == WAIT:
        return "executor waiting for thunks"
    if name.startswith(RUNTIME):
        return None
    target = calls.get(name, "")
    if target.startswith("ember.sparse_"):
        return "fused updates"
    if target == "ember.scatter_grad":
        return "gradient kernels"
    if target:
        return "forward ember calls"
    if "copy" in name:
        return "XLA copies"
    if "scatter" in name:
        return "XLA scatters"
    return "XLA other ops"


def profile(run: Callable[[], object], steps: int = 3) -> tuple[float, dict[str, float]]:
    """(wall ms per step, ms per step of each part) of ``steps`` runs of ``run`` (warm)."""
    import jax
    from jax._src.lib import _profile_data

    run()
    with tempfile.TemporaryDirectory(prefix="ember_train_profile_") as out:
        with jax.profiler.trace(out):
            t0 = time.perf_counter()
            for _ in range(steps):
                run()
            wall = (time.perf_counter() - t0) / steps
        (path,) = glob.glob(out + "/**/*.xplane.pb", recursive=True)
        planes = _profile_data.ProfileData.from_file(path).planes
    parts: dict[str, float] = {}
    for plane in planes:
        for line in plane.lines:
            for ev in line.events:
                part = part_of(ev.name, getattr(run, "calls", {}))
                if part is not None:
                    parts[part] = parts.get(part, 0.0) + ev.duration_ns / 1e6 / steps
    return wall * 1e3, dict(sorted(parts.items(), key=lambda kv: -kv[1]))


def breakdown_line(name: str, wall: float, parts: dict[str, float]) -> str:
    shown = ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
    return f"  {name}: {wall:.1f} ms per step under the profiler; {shown} (ms per step)"
