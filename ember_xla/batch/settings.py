"""The settings of one batch job, and the hash of those that change a model's outputs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from ember_xla.runtime.compare import VERIFY_ATOL, VERIFY_RTOL

RUNNERS = ("local", "beam")


@dataclasses.dataclass(frozen=True)
class JobSettings:
    inputs: tuple[str, ...]                 # globs
    out: str
    actions: tuple[str, ...] = ("rewrite", "verify")
    workers: int = 1
    timeout_s: float = 600.0
    memory_mb: int = 0                      # 0: no limit of our own
    runner: str = "local"
    seed: int = 0
    group_tables: bool = True
    signature: str | None = None
    unknown_dim: int | str = 8              # --unknown_dim (hlo_import/unknown_dims.py)
    tf_import: tuple[str, ...] = ()         # --tf_import (hlo_import/tf_packages.py)
    timing_repeats: int = 10
    verify_atol: float = VERIFY_ATOL
    verify_rtol: float = VERIFY_RTOL
    retry_failed: bool = True
    progress: str = "auto"                  # auto | bar | log | none
    beam_options: str = ""
    extra: tuple[tuple[str, Any], ...] = ()  # settings of plugged-in actions (target, -O...)

    def output_settings(self) -> dict[str, Any]:
        """What a model's outputs depend on (not workers, runner, timeouts or display)."""
        from ember_xla import __version__

        d = {"actions": list(self.actions), "seed": self.seed, "group_tables": self.group_tables,
             "signature": self.signature, "unknown_dim": self.unknown_dim,
             "verify_atol": self.verify_atol, "verify_rtol": self.verify_rtol,
             "extra": [list(kv) for kv in self.extra],
             "ember_xla": __version__}
        if "time" in self.actions:
            d["timing_repeats"] = self.timing_repeats
        return d

    def settings_hash(self) -> str:
        text = json.dumps(self.output_settings(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["inputs"], d["actions"] = list(self.inputs), list(self.actions)
        d["tf_import"] = list(self.tf_import)
        d["extra"] = dict(self.extra)
        return d


def settings_from_dict(d: dict[str, Any]) -> JobSettings:
    d = dict(d)
    d["inputs"], d["actions"] = tuple(d["inputs"]), tuple(d["actions"])
    d["tf_import"] = tuple(d.get("tf_import", ()))
    d["extra"] = tuple(sorted(dict(d.get("extra", {})).items()))
    return JobSettings(**d)
