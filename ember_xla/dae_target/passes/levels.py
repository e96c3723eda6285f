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

import re

from ember_xla.ir.graph import Module
from ember_xla.ir.passes import ModulePass, PassPipeline, parse_pipeline
from ember_xla.ir.verify import verify_generic_module

#: ``-O<n>`` -> its pipeline (the passes after lowering to SLC).
LEVELS: dict[int, str] = {
    0: "decouple",
    1: "vectorize{vl=8},decouple",
    2: "vectorize{vl=8},bufferize,decouple",
    3: "vectorize{vl=8},bufferize,queue-align,simplify-mem,decouple",
    4: "dedup,vectorize{vl=8},bufferize,queue-align,simplify-mem,hoist,decouple",
}


class UnknownLevel(ValueError):
    """``-O<n>`` names no level."""


def spelled_level(text: str) -> int | None:
    """The ``n`` of ``"-O<n>"``, ``"O<n>"`` or ``"<n>"``; None for any other text (the one
    reading of the ``-O`` spelling: the CLI's argv and ``level_pipeline`` use it)."""
    m = re.fullmatch(r"-?O?([0-9]+)", text.strip())
    return int(m.group(1)) if m else None


def parse_level(level: int | str) -> int:
    """The level ``level`` names (an int or a spelling); ``UnknownLevel`` if there is none."""
    n = level if isinstance(level, int) else spelled_level(level)
    if n is None or n not in LEVELS:
        have = ", ".join(f"-O{k}" for k in sorted(LEVELS))
        raise UnknownLevel(f"unknown optimization level -O{n if n is not None else level} "
                           f"(have {have})")
    return n


def level_pipeline(level: int | str) -> str:
    """The pipeline string of ``level`` (``3``, ``"O3"``, ``"-O3"`` or ``"3"``); any other text
    is taken as a pipeline string itself."""
    if isinstance(level, str) and spelled_level(level) is None:
        return level
    return LEVELS[parse_level(level)]


def passes_of(level_or_pipeline: int | str) -> list[ModulePass]:
    import ember_xla.dae_target.passes  # noqa: F401  (registers the passes)

    return parse_pipeline(level_pipeline(level_or_pipeline))


def run_stages(module: Module, level_or_pipeline: int | str, verify: bool = True
               ) -> list[tuple[str, Module, object]]:
    """Run the passes of a level on a copy of ``module``; returns ``(pass name, copy after
    the pass, the pass's report)`` per pass. ``verify`` checks the IR after each pass."""
    out: list[tuple[str, Module, object]] = []
    PassPipeline.from_spec(
        passes_of(level_or_pipeline),
        verify=(lambda m, _p: verify_generic_module(m)) if verify else None,
        callback=lambda p, m, report: out.append((p.name, m.clone(), report)),
    ).apply(module.clone())
    return out


def lower_cluster(spec: object, level_or_pipeline: int | str = 0, verify: bool = True
                  ) -> list[tuple[str, Module]]:
    """Lower a ``ClusterSpec`` to SLC, then through the level's passes: ``[(stage, Module)]``
    starting with ``("slc", ...)``. ``LoweringRefused`` when the cluster cannot be lowered;
    ``PipelineError`` for a bad pipeline string."""
    from ember_xla.dae_target.lower.to_slc import lower_to_slc

    passes_of(level_or_pipeline)  # a bad pipeline fails before lowering
    slc = lower_to_slc(spec)
    if verify:
        verify_generic_module(slc)
    return [("slc", slc)] + [(n, m) for n, m, _ in run_stages(slc, level_or_pipeline, verify)]


def lower_final(spec: object, level_or_pipeline: int | str = 0, verify: bool = True,
                cache: dict[tuple[str, str], tuple[str, Module]] | None = None) -> Module:
    """The last stage of ``lower_cluster`` only (no copy after each pass). ``cache``: finished
    modules by (SLC text but the module's name, pipeline): a cluster whose SLC prints as an
    earlier one's (the lowering reads sizes at run time, so the tables of one shape class do)
    gets a copy of that result, which the deterministic passes would have produced again,
    under its own module name (reused only when the passes kept the name)."""
    from ember_xla.dae_target.lower.to_slc import lower_to_slc
    from ember_xla.ir.printer import print_module

    passes = passes_of(level_or_pipeline)
    slc = lower_to_slc(spec)
    if verify:
        verify_generic_module(slc)
    key = None
    if cache is not None:
        head, _, body = print_module(slc).partition("\n")
        key = (_MODULE_NAME.sub("module @_", head, count=1) + "\n" + body,
               level_pipeline(level_or_pipeline))
        if key in cache and cache[key][1].name == cache[key][0]:
            out = cache[key][1].clone()
            out.name = slc.name
            return out
    name = slc.name
    out = PassPipeline.from_spec(
        passes, verify=(lambda m, _p: verify_generic_module(m)) if verify else None).apply(slc)
    if key is not None:
        cache[key] = (name, out.clone())
    return out


_MODULE_NAME = re.compile(r"^module @\S+")
