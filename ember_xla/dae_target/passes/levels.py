"""The named optimization levels of ``ember-xla lower`` (Ember's ladder, then ours) and the
driver that lowers one cluster through a level, keeping the IR after every stage.

    -O0  lower + decouple                              (no optimization)
    -O1  + vectorize{vl=8}
    -O2  + bufferize                                   (a whole row per queue buffer)
    -O3  + queue-align, simplify-mem                   (Ember's best)
    -O4  + dedup (before vectorize), hoist             (beyond Ember)

Every level ends in ``decouple`` (SLC/SLCV -> DLC). ``lower_cluster(spec, 3)`` (or ``"O3"``,
or a pipeline string such as ``"vectorize{vl=16},bufferize,decouple"``) returns the stages as
``[(name, Module)]``: ``"slc"`` (the lowering), then one entry per pass named after it, each a
separate copy (print-after-all prints them in order)."""

from __future__ import annotations

from ember_xla.ir.graph import Module
from ember_xla.ir.passes import ModulePass, parse_pipeline
from ember_xla.ir.verify import verify_generic_module

#: ``-O<n>`` -> its pipeline (the passes after lowering to SLC).
LEVELS: dict[int, str] = {
    0: "decouple",
    1: "vectorize{vl=8},decouple",
    2: "vectorize{vl=8},bufferize,decouple",
    3: "vectorize{vl=8},bufferize,queue-align,simplify-mem,decouple",
    4: "dedup,vectorize{vl=8},bufferize,queue-align,simplify-mem,hoist,decouple",
}


def level_pipeline(level: int | str) -> str:
    """The pipeline string of ``level`` (``3``, ``"O3"``, ``"-O3"`` or ``"3"``); any other text
    is taken as a pipeline string itself."""
    if isinstance(level, int):
        return LEVELS[level]
    key = level.strip().lstrip("-").removeprefix("O")
    return LEVELS[int(key)] if key.isdigit() and int(key) in LEVELS else level


def passes_of(level_or_pipeline: int | str) -> list[ModulePass]:
    import ember_xla.dae_target.passes  # noqa: F401  (registers the passes)

    return parse_pipeline(level_pipeline(level_or_pipeline))


def run_stages(module: Module, level_or_pipeline: int | str, verify: bool = True
               ) -> list[tuple[str, Module, object]]:
    """Run the passes of a level on a copy of ``module``; returns ``(pass name, copy after
    the pass, the pass's report)`` per pass. ``verify`` checks the IR after each pass."""
    out: list[tuple[str, Module, object]] = []
    cur = module.clone()
    for p in passes_of(level_or_pipeline):
        report = p.apply(cur)
        if verify:
            verify_generic_module(cur)
        out.append((p.name, cur.clone(), report))
    return out


def lower_cluster(spec: object, level_or_pipeline: int | str = 0, verify: bool = True
                  ) -> list[tuple[str, Module]]:
    """Lower a ``ClusterSpec`` to SLC, then through the level's passes: ``[(stage, Module)]``
    starting with ``("slc", ...)``. ``LoweringRefused`` when the cluster cannot be lowered;
    ``PipelineError`` for a bad pipeline string."""
    from ember_xla.dae_target.lower.to_slc import lower_cluster as to_slc

    passes_of(level_or_pipeline)  # a bad pipeline fails before lowering
    slc = to_slc(spec)
    if verify:
        verify_generic_module(slc)
    return [("slc", slc)] + [(n, m) for n, m, _ in run_stages(slc, level_or_pipeline, verify)]
