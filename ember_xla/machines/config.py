"""Target descriptions of DAE machines: ``configs/*.toml`` read with ``tomllib`` into frozen
dataclasses and validated. Every error is one line naming the file, the key and what was
expected. Every timing parameter of the emulator comes from here (docs: configs/README.md)."""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path
from typing import Any

from ember_xla.util.input_files import open_regular, refuse_special


class TargetError(ValueError):
    """A target description is missing, unreadable or invalid."""


@dataclasses.dataclass(frozen=True)
class AccessUnit:
    layers: int                    # traversal-unit layers (loop levels)
    lanes: int                     # lanes per layer
    outstanding_requests: int      # memory requests in flight per access unit
    data_queue_bytes: int          # data queue per lane
    control_queue_entries: int     # control tokens the queue holds
    lockstep: bool                 # lanes can run a vector traversal in lockstep
    broadcast: bool                # a parent layer can broadcast to several lanes
    addresses_per_cycle: int       # address generation rate per lane


@dataclasses.dataclass(frozen=True)
class ExecuteUnit:
    vector_bits: int
    callback_dispatch_cycles: int  # pop a control token and jump to its case
    op_cycles: dict[str, int]      # issue cycles per vector op class


@dataclasses.dataclass(frozen=True)
class Cache:
    name: str
    size_bytes: int
    line_bytes: int
    associativity: int
    latency_cycles: int
    shared: bool                   # shared by all cores (else one per core)


@dataclasses.dataclass(frozen=True)
class DramBanks:
    """The optional bank model of a DRAM (``[dram]`` keys ``channels`` .. ``row_miss_ns``):
    lines interleave in ``row_bytes`` chunks over channels, then banks; a bank keeps one row
    open (a request to it pays ``row_hit_ns``, else ``row_miss_ns``: precharge + activate)."""

    channels: int                  # the bandwidth is split evenly over them
    banks_per_channel: int
    row_bytes: int
    row_hit_ns: float
    row_miss_ns: float


@dataclasses.dataclass(frozen=True)
class Dram:
    latency_ns: float
    bandwidth_gb_per_s: float      # shared by all cores
    banks: DramBanks | None = None  # None: one channel, no bank model


@dataclasses.dataclass(frozen=True)
class Dma:
    """Per-core DMA engine of an NPU core: row-granular global-memory reads, no data cache."""

    latency_ns: float              # descriptor issue -> data in the core's buffer
    bandwidth_gb_per_s: float      # this core's share of the global-memory port
    outstanding: int               # descriptors in flight per core
    issue_cycles: int              # scalar cycles to build and issue one descriptor
    granule_bytes: int             # a transfer moves a multiple of this many bytes
    index_cycles: int              # scalar cycles to read one index (and dedup it, UB paths)
    piece_setup_cycles: int        # fixed cost of one table share on one core (tiling, sync)


@dataclasses.dataclass(frozen=True)
class Npu:
    """The NPU parts of a target (``[dma]``, ``[unified_buffer]``, scratchpad timing)."""

    dma: Dma
    ub_bytes: int                  # unified buffer: staging chunks + accumulators
    l1_latency_cycles: int         # scratchpad -> unified buffer copy latency
    l1_bytes_per_cycle: int        # scratchpad read port
    preload: str                   # "model": L1 preload once per model load; "batch": per batch


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    description: str
    cores: int
    clock_ghz: float
    access: AccessUnit
    execute: ExecuteUnit
    caches: tuple[Cache, ...]
    dram: Dram
    scratchpad_bytes: int          # core-local scratchpad ("L1" of an NPU core); 0 = none
    source: str                    # the file it was read from
    npu: Npu | None = None         # multi-core NPU parts (configs/npu.toml); None for DAE cores

    @property
    def vector_lanes_f32(self) -> int:
        return self.execute.vector_bits // 32

    @property
    def dram_latency_cycles(self) -> float:
        return self.dram.latency_ns * self.clock_ghz

    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram.bandwidth_gb_per_s / self.clock_ghz

    @property
    def private_levels(self) -> int:
        """How many cache levels each core has of its own (the ones before the first shared
        level; every level after it is shared too)."""
        return next((i for i, c in enumerate(self.caches) if c.shared), len(self.caches))


OP_CLASSES = ("load", "store", "add", "mul", "max", "convert", "compare", "select", "scalar")

_SCHEMA: dict[str, dict[str, tuple[type, ...]]] = {
    "target": {"name": (str,), "description": (str,), "cores": (int,), "clock_ghz": (float, int)},
    "access_unit": {"layers": (int,), "lanes": (int,), "outstanding_requests": (int,),
                    "data_queue_bytes": (int,), "control_queue_entries": (int,),
                    "lockstep": (bool,), "broadcast": (bool,), "addresses_per_cycle": (int,)},
    "execute_unit": {"vector_bits": (int,), "callback_dispatch_cycles": (int,),
                     "op_cycles": (dict,)},
    "dram": {"latency_ns": (float, int), "bandwidth_gb_per_s": (float, int)},
    "scratchpad": {"size_bytes": (int,)},
}
_CACHE_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,), "size_bytes": (int,), "line_bytes": (int,), "associativity": (int,),
    "latency_cycles": (int,), "shared": (bool,)}
_OPTIONAL = {  # sections/keys only NPU targets have; tmu.toml and tiny.toml omit them
    "dma": {"latency_ns": (float, int), "bandwidth_gb_per_s": (float, int),
            "outstanding": (int,), "issue_cycles": (int,), "granule_bytes": (int,),
            "index_cycles": (int,), "piece_setup_cycles": (int,)},
    "unified_buffer": {"size_bytes": (int,)},
}
_DRAM_BANKS = {"channels": (int,), "banks_per_channel": (int,), "row_bytes": (int,),
               "row_hit_ns": (float, int), "row_miss_ns": (float, int)}
_SCRATCHPAD_NPU = {"latency_cycles": (int,), "bytes_per_cycle": (int,), "preload": (str,)}
PRELOAD_MODES = ("model", "batch")
_MAY_BE_ZERO = {"scratchpad.size_bytes", "dma.piece_setup_cycles"}
_KIND = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
         dict: "a table"}


def _check_table(path: str, where: str, table: Any, keys: dict[str, tuple[type, ...]]
                 ) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise TargetError(f"{path}: [{where}] must be a table")
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise TargetError(f"{path}: {where}.{unknown[0]}: unknown key (expected one of "
                          f"{', '.join(keys)})")
    for key, kinds in keys.items():
        full = f"{where}.{key}"
        if key not in table:
            raise TargetError(f"{path}: {full}: missing (expected {_KIND[kinds[0]]})")
        v = table[key]
        if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
            raise TargetError(f"{path}: {full}: expected {_KIND[kinds[0]]}, got {v!r}")
        if isinstance(v, int | float) and not isinstance(v, bool):
            _check_number(path, full, v)
            if v < 0 or (v == 0 and full not in _MAY_BE_ZERO):
                raise TargetError(f"{path}: {full}: expected a positive value, got {v!r}")
    return table


MAX_INT = 2**53 - 1  # exact in a double and in an int64, the C++ emulator's types


def _check_number(path: str, full: str, v: int | float) -> None:
    """Integers exact in both C++ types the emulator computes in; floats finite."""
    if isinstance(v, float) and not math.isfinite(v):
        raise TargetError(f"{path}: {full}: expected a finite number, got {v!r}")
    if isinstance(v, int) and not -MAX_INT <= v <= MAX_INT:
        raise TargetError(f"{path}: {full}: {v} is out of range (at most 2^53 - 1)")


def parse_target(data: dict[str, Any], path: str = "<target>") -> Target:
    """Validate a parsed TOML document and build the ``Target``."""
    unknown = sorted(set(data) - set(_SCHEMA) - set(_OPTIONAL) - {"cache"})
    if unknown:
        raise TargetError(f"{path}: [{unknown[0]}]: unknown section (expected "
                          f"{', '.join(list(_SCHEMA) + ['cache'] + list(_OPTIONAL))})")
    npu = _parse_npu(data, path)
    sp = dict(data.get("scratchpad", {})) if isinstance(data.get("scratchpad"), dict) else \
        data.get("scratchpad", {})
    if npu is not None and isinstance(sp, dict):
        for k in _SCRATCHPAD_NPU:
            sp.pop(k, None)
    dram_raw = data.get("dram", {})
    banks = None
    if isinstance(dram_raw, dict) and set(_DRAM_BANKS) & set(dram_raw):
        b = _check_table(path, "dram", {k: dram_raw[k] for k in _DRAM_BANKS if k in dram_raw},
                         _DRAM_BANKS)
        banks = DramBanks(b["channels"], b["banks_per_channel"], b["row_bytes"],
                          float(b["row_hit_ns"]), float(b["row_miss_ns"]))
        dram_raw = {k: v for k, v in dram_raw.items() if k not in _DRAM_BANKS}
    given = {"scratchpad": sp, "dram": dram_raw}
    t = {s: _check_table(path, s, given[s] if s in given else data.get(s, {}), keys)
         for s, keys in _SCHEMA.items()}
    ops = t["execute_unit"]["op_cycles"]
    for cls in OP_CLASSES:
        v = ops.get(cls)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise TargetError(f"{path}: execute_unit.op_cycles.{cls}: expected a positive "
                              f"integer, got {v!r}")
        _check_number(path, f"execute_unit.op_cycles.{cls}", v)
    extra = sorted(set(ops) - set(OP_CLASSES))
    if extra:
        raise TargetError(f"{path}: execute_unit.op_cycles.{extra[0]}: unknown op class "
                          f"(expected one of {', '.join(OP_CLASSES)})")
    caches_raw = data.get("cache", [])
    if not isinstance(caches_raw, list) or not caches_raw:
        raise TargetError(f"{path}: [[cache]]: expected at least one cache level")
    caches = []
    for i, c in enumerate(caches_raw):
        c = _check_table(path, f"cache[{i}]", c, _CACHE_KEYS)
        lines = c["size_bytes"] // c["line_bytes"]
        if c["size_bytes"] % c["line_bytes"] or lines % c["associativity"]:
            raise TargetError(f"{path}: cache[{i}].size_bytes: expected a multiple of "
                              "line_bytes x associativity")
        caches.append(Cache(**c))
    if banks is not None and banks.row_bytes % caches[0].line_bytes:
        raise TargetError(f"{path}: dram.row_bytes: expected a multiple of the line size "
                          f"({caches[0].line_bytes})")
    shared = [c.shared for c in caches]
    if any(shared) and not all(shared[shared.index(True):]):
        raise TargetError(f"{path}: [[cache]]: a private level after a shared one (the "
                          "shared levels must be the last)")
    vb = t["execute_unit"]["vector_bits"]
    if vb % 32:
        raise TargetError(f"{path}: execute_unit.vector_bits: expected a multiple of 32, "
                          f"got {vb}")
    tgt = t["target"]
    return Target(
        name=tgt["name"], description=tgt["description"], cores=tgt["cores"],
        clock_ghz=float(tgt["clock_ghz"]), access=AccessUnit(**t["access_unit"]),
        execute=ExecuteUnit(vb, t["execute_unit"]["callback_dispatch_cycles"], dict(ops)),
        caches=tuple(caches),
        dram=Dram(float(t["dram"]["latency_ns"]), float(t["dram"]["bandwidth_gb_per_s"]),
                  banks),
        scratchpad_bytes=t["scratchpad"]["size_bytes"], source=path, npu=npu)


def _parse_npu(data: dict[str, Any], path: str) -> Npu | None:
    """The optional NPU sections: all of ``[dma]``, ``[unified_buffer]`` and the scratchpad's
    timing keys, or none of them."""
    present = [s for s in _OPTIONAL if s in data]
    if not present:
        return None
    for s in _OPTIONAL:
        if s not in data:
            raise TargetError(f"{path}: [{s}]: missing (expected with [{present[0]}] on an "
                              "NPU target)")
    dma = _check_table(path, "dma", data["dma"], _OPTIONAL["dma"])
    ub = _check_table(path, "unified_buffer", data["unified_buffer"],
                      _OPTIONAL["unified_buffer"])
    raw = data.get("scratchpad", {})
    if not isinstance(raw, dict):
        raise TargetError(f"{path}: [scratchpad] must be a table")
    sp = _check_table(path, "scratchpad", {k: raw[k] for k in _SCRATCHPAD_NPU if k in raw},
                      _SCRATCHPAD_NPU)
    if sp["preload"] not in PRELOAD_MODES:
        raise TargetError(f"{path}: scratchpad.preload: expected one of "
                          f"{', '.join(PRELOAD_MODES)}, got {sp['preload']!r}")
    return Npu(dma=Dma(float(dma["latency_ns"]), float(dma["bandwidth_gb_per_s"]),
                       dma["outstanding"], dma["issue_cycles"], dma["granule_bytes"],
                       dma["index_cycles"], dma["piece_setup_cycles"]),
               ub_bytes=ub["size_bytes"], l1_latency_cycles=sp["latency_cycles"],
               l1_bytes_per_cycle=sp["bytes_per_cycle"], preload=sp["preload"])


def builtin_configs() -> Path:
    """The folder of the shipped target descriptions: ``ember_xla/configs`` in an installed
    package (CMake installs the repository's ``configs/`` there), else the source tree's."""
    pkg = Path(__file__).resolve().parent.parent
    installed = pkg / "configs"
    return installed if installed.is_dir() else pkg.parent / "configs"


def load_target(name_or_path: str | Path) -> Target:
    """Read a target: a ``.toml`` path, or the name of a shipped one (``tmu``, ``tiny``)."""
    p = Path(name_or_path)
    if not p.suffix and not p.exists():
        p = builtin_configs() / f"{p}.toml"
    refuse_special(str(p))
    if not p.is_file():
        shipped = sorted(q.stem for q in builtin_configs().glob("*.toml"))
        raise TargetError(f"{name_or_path}: no such target file (shipped targets: "
                          f"{', '.join(shipped) or 'none'})")
    try:
        with open_regular(str(p)) as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise TargetError(f"{p}: not valid TOML: {e}") from None
    except OSError as e:
        raise TargetError(f"{p}: cannot read: {e.strerror}") from None
    return parse_target(data, str(p))
