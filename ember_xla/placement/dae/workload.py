"""A model's clusters as placement sees them on a DAE target: per cluster its spec, the
operands and native results of one captured run, which program variants it has, and for each
variant the program of any share of its batch and the ``Profile`` of its whole run (the
counts the cost model scales). The whole run of each variant is also checked against the
native kernel bit for bit: a variant that differs is a failed verification
(``VariantMismatch``, naming the output and index), one that does not fit the target is
dropped with its reason."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ember_xla.call_specs import ClusterSpec
from ember_xla.emulator.cores import KeptRun, run_kept
from ember_xla.machines.config import Target
from ember_xla.placement.dae.cost import PieceLoad, Profile, row_counts
from ember_xla.placement.dae.shares import Share, lookup_operand, rows, share, whole_only
from ember_xla.placement.dae.variants import DEFAULT, VARIANTS, pipeline
from ember_xla.runtime.compare import mismatch_line, verify_outputs


class VariantMismatch(Exception):
    """An emulated program variant's outputs differ from the native kernel's (a wrong result
    of one of the two, not a property of the input)."""


#: DLC modules by (SLC text, pipeline), shared by the clusters of one shape class
#: (``levels.lower_final``): 26 tables of one width compile each variant once.
_COMPILED: dict[tuple[str, str], tuple[str, Any]] = {}


@dataclasses.dataclass
class ClusterWork:
    index: int
    spec: ClusterSpec
    operands: list[np.ndarray]
    results: list[np.ndarray]          # the native kernel's
    whole_reason: str | None           # why it cannot be split by batch (None: it can)
    profiles: dict[str, Profile] = dataclasses.field(default_factory=dict)
    dropped: dict[str, str] = dataclasses.field(default_factory=dict)  # variant -> why
    _dlc: dict[str, Any] = dataclasses.field(default_factory=dict)
    _counts: Any = None                # lookups per distinct row of the whole batch
    fast: bool = False                 # runs in the addresses mode where the program allows

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def rows(self) -> int:
        return rows(self.spec)

    @property
    def variants(self) -> list[str]:
        return list(self.profiles)

    def share(self, start: int, stop: int) -> Share:
        return _share(self, start, stop)

    def dlc(self, variant: str) -> Any:
        if variant not in self._dlc:
            from ember_xla.dae_target.passes.levels import lower_final

            if len(_COMPILED) > 512:
                _COMPILED.clear()
            self._dlc[variant] = lower_final(self.spec, pipeline(variant), cache=_COMPILED)
        return self._dlc[variant]

    def program(self, variant: str, sh: Share, target: Target) -> Any:
        from ember_xla.dae import bind_program
        from ember_xla.dae_target.program import emit_program

        p = emit_program(self.dlc(variant), [x.shape for x in sh.operands], sh.output_shapes)
        bind_program(p, target)
        return p

    def run(self, variant: str, start: int, stop: int, target: Target) -> KeptRun:
        """The run of one share; with ``fast`` in the addresses mode (no outputs) unless the
        program's addresses depend on computed data (then the full mode)."""
        from ember_xla.emulator.executor_cc import AddressesUnsupported

        sh = self.share(start, stop)
        program = self.program(variant, sh, target)
        if self.fast:
            try:
                return run_kept(program, sh.operands, sh.output_shapes, "addresses")
            except AddressesUnsupported:
                pass
        return run_kept(program, sh.operands, sh.output_shapes)

    def load(self, variant: str, start: int, stop: int) -> PieceLoad:
        sh = self.share(start, stop)
        if self._counts is None:
            self._counts = row_counts(self.share(0, self.rows).lookups)
        return PieceLoad(self.profiles[variant], len(sh.lookups), stop - start,
                         row_counts(sh.lookups), self.index, self._counts)


def _share(c: ClusterWork, start: int, stop: int) -> Share:
    return share(c.spec, c.operands, start, stop)


def _bases(arrays: list[np.ndarray]) -> list[int]:
    """Each argument's address in a run (cc/machine.cc: 4 KiB-aligned, in argument order)."""
    out, nxt = [], 0
    for a in arrays:
        out.append(nxt)
        nxt = (nxt + max(a.nbytes, 1) + 4095) // 4096 * 4096
    return out


def profile_of(c: ClusterWork, run: KeptRun, target: Target) -> Profile:
    kind, a, b, _ = run.trace_arrays()
    line = target.caches[0].line_bytes
    loads = kind == 0
    a, b = a[loads], np.maximum(b[loads], 1)
    lines = (a + b - 1) // line - a // line + 1
    args = [*c.operands, *c.results]  # a whole run's outputs: the native results' shapes
    bases = _bases(args)
    in_table = np.zeros(len(a), bool)
    for p in c.spec.parts:
        k = p.first_operand
        in_table |= (a >= bases[k]) & (a < bases[k] + args[k].nbytes)
    n_ids = max(sum(int(np.asarray(c.operands[lookup_operand(c.spec, k)]).size)
                    for k in range(len(c.spec.parts))), 1)
    n_rows = max(c.rows, 1)
    per_id = per_row = 0.0
    for fired, cyc in run.case_firings(target):
        if fired and fired % n_rows == 0 and fired // n_rows <= 2 and fired != n_ids:
            per_row += fired * cyc
        else:
            per_id += fired * cyc
    per_part = [(int(np.asarray(c.operands[lookup_operand(c.spec, k)]).size),
                 np.ceil(c.operands[p.first_operand].itemsize * int(p.table.shape[1]) / line))
                for k, p in enumerate(c.spec.parts)]  # a table's lookups, lines of one row
    row_lines = float(sum(n * r for n, r in per_part) / n_ids) if sum(n for n, _ in per_part) \
        else float(per_part[0][1])
    first = a[~in_table] // line
    last = (a[~in_table] + b[~in_table] - 1) // line
    touched = np.unique(np.concatenate([first, last])) if len(first) else first
    return Profile(float(lines[in_table].sum()) / n_ids, float(lines[~in_table].sum()) / n_ids,
                   per_id / n_ids, per_row / n_rows, row_lines, float(len(touched)) / n_ids)


def cluster_work(index: int, spec: ClusterSpec, operands: list[np.ndarray],
                 results: list[np.ndarray], target: Target,
                 variants: tuple[str, ...] = tuple(VARIANTS), fast: bool = False
                 ) -> ClusterWork:
    """Compile and run each variant on the whole batch: its profile, or why it was dropped.
    The default variant must be there (else ``ValueError`` with the reason). ``fast``: the
    runs in the addresses mode where the program allows (their outputs are not computed, so
    only the full-mode runs are checked against the native kernel)."""
    from ember_xla.dae.errors import ProgramDoesNotFit

    c = ClusterWork(index, spec, [np.asarray(x) for x in operands],
                    [np.asarray(x) for x in results], whole_only(spec, operands), fast=fast)
    for v in variants:
        try:
            run = c.run(v, 0, c.rows, target)
        except (ProgramDoesNotFit, ValueError, LookupError) as e:
            c.dropped[v] = " ".join(str(e).split())
            continue
        if run.mode == "full":  # the addresses mode computes no outputs to compare
            check = verify_outputs(c.results, run.outputs, 0.0, 0.0)
            if not check["bitwise_equal"]:
                run.close()
                raise VariantMismatch(f"cluster %{spec.name}: the {v} program's "
                                      + mismatch_line(check, None, "the native kernel's"))
        c.profiles[v] = profile_of(c, run, target)
        run.close()
    if DEFAULT not in c.profiles:
        raise ValueError(f"cluster %{spec.name}: the {DEFAULT} program "
                         f"{c.dropped.get(DEFAULT, 'is missing')}")
    return c
