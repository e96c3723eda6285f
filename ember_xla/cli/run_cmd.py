"""``ember-xla run MODEL [--inputs x.npz] [--outputs y.npz]``: execute a module (original or
rewritten) on XLA:CPU with random valid or given inputs; outputs are labelled and saved by the
signature's output names when the model has them (a SavedModel, or a rewritten one's
``outputs.json``), else by position (``arr_<i>``)."""

from __future__ import annotations

import collections
import io
import zipfile
import zlib
from typing import Any

import numpy as np

from ember_xla.hlo_import.bound_params import npz_value
from ember_xla.hlo_import.model import Model
from ember_xla.orchestrate.errors import UsageError
from ember_xla.runtime.compare import time_modules
from ember_xla.runtime.execute import compile_module
from ember_xla.runtime.inputs import check_budget, random_inputs
from ember_xla.util.atomic import write_atomic
from ember_xla.util.input_files import open_regular


def load_inputs(model: Model, path: str | None, seed: int) -> list[np.ndarray]:
    params = sorted(model.module.entry.params(),
                    key=lambda p: p.attributes.get("parameter_number", 0))
    check_budget(model.module)
    if path is None:
        return random_inputs(model.module, seed, model.bound)
    try:
        with open_regular(path) as f:
            magic = f.read(4)
    except OSError as e:
        raise UsageError(f"{path}: cannot read inputs ({e.strerror})") from None
    if magic != b"PK\x03\x04":
        raise UsageError(f"{path}: not an .npz file (no zip header); expected np.savez output")
    try:
        data = np.load(path, allow_pickle=False)
        return _match(model, params, data, path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        if isinstance(e, UsageError):
            raise
        msg = " ".join(str(e).split())[:200]
        raise UsageError(f"{path}: cannot read inputs ({type(e).__name__}: {msg}); expected an "
                         ".npz file as np.savez writes it") from None


def _match(model: Model, params: list, data: Any, path: str) -> list[np.ndarray]:
    """One array per parameter, by name (or ``arr_<n>``/``<n>``); bound parameters (a
    SavedModel's variables) take their values unless the file gives one. Missing, extra and
    misshaped arrays are one error naming them."""
    out: list[np.ndarray | None] = []
    used: set[str] = set()
    missing = []
    short = _short_names(params)
    for i, p in enumerate(params):
        num = p.attributes.get("parameter_number", i)
        for key in (p.name, *short.get(p.name, ()), f"arr_{num}", str(num)):
            if key in data:
                arr = data[key]
                used.add(key)
                break
        else:
            if num in model.bound:
                out.append(model.bound[num])
            else:
                missing.append(f"{p.name!r} {p.result.type}")
                out.append(None)
            continue
        want = p.result.type
        arr = npz_value(arr, want.dtype)
        if tuple(arr.shape) != want.dims or arr.dtype != want.dtype:
            raise UsageError(f"{path}: input {p.name!r} (parameter {num}) is "
                             f"{arr.dtype}{list(arr.shape)}, expected {want}")
        out.append(arr)
    if missing:
        raise UsageError(f"{path}: no array for input{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)} (keys: the inputs' names, or arr_<n> for "
                         "parameter n)")
    unknown = sorted(set(data.files) - used)
    if unknown:
        names = ", ".join(repr(k) for k in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        expected = ", ".join(p.name for i, p in enumerate(params)
                             if p.attributes.get("parameter_number", i) not in model.bound)
        raise UsageError(f"{path}: {len(unknown)} array(s) for no input: {names} "
                         f"(expected: {expected or 'none'})")
    return [a for a in out if a is not None]


def _short_names(params: list) -> dict[str, tuple[str, ...]]:
    """Other keys each parameter answers to: the name the exporter gave it (``op_name``, e.g.
    JAX's argument name ``t`` for HLO's ``t.1``) and the HLO name without its ``.N`` suffix,
    where no other parameter answers to the same."""
    cands = {p.name: sorted({str((p.attributes.get("metadata") or {}).get("op_name", "")),
                             _without_suffix(p.name)} - {"", p.name}) for p in params}
    counts = collections.Counter(n for names in cands.values() for n in names)
    return {k: tuple(n for n in v if counts[n] == 1 and n not in cands)
            for k, v in cands.items()}


def _without_suffix(name: str) -> str:
    """``t`` for HLO's ``t.1``; "" when ``name`` has no ``.N`` suffix."""
    head, _, tail = name.rpartition(".")
    return head if head and tail.isdigit() else ""


def output_keys(model: Model, count: int) -> list[str]:
    """The outputs' names: the signature's (``Model.output_names``) when the model has one per
    output, else ``arr_<i>`` (np.savez's default keys)."""
    if len(model.output_names) == count:
        return list(model.output_names)
    return [f"arr_{i}" for i in range(count)]


def run_model(model: Model, inputs_path: str | None, outputs_path: str | None, seed: int,
              repeat: int) -> str:
    inputs = load_inputs(model, inputs_path, seed)
    exe = compile_module(model.module)
    outs = exe.run(inputs)
    # timed on inputs already on the device (donated ones given fresh buffers), as jax times
    # a jitted function: not the copies of numpy inputs in and outputs out
    median = time_modules({"model": model.module}, inputs, repeat)["model"] if repeat else None
    names = output_keys(model, len(outs))
    lines = [f"{model.source}: {len(outs)} outputs"]
    for i, (name, o) in enumerate(zip(names, outs, strict=True)):
        flat = o.reshape(-1)[:4]
        label = f"{i}" if name == f"arr_{i}" else f"{i} {name!r}"
        lines.append(f"  output {label}: {o.dtype}{list(o.shape)} first values "
                     f"{flat.tolist()}")
    if median is not None:
        lines.append(f"  median time per run over {repeat} runs: {1e3 * median:.3f} ms "
                     "(inputs on the device)")
    if outputs_path:
        buf = io.BytesIO()
        np.savez(buf, **dict(zip(names, outs, strict=True)))
        write_atomic(outputs_path, buf.getvalue())
        lines.append(f"  outputs written to {outputs_path}")
    return "\n".join(lines)
