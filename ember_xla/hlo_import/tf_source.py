"""HLO from TensorFlow: a ``tf.function`` (compiled with XLA) and SavedModel signatures.

Variables captured by the function become entry parameters after the user inputs; their
current values are returned as bound parameters so the module can be run as is. Parameters
are named after the signature's inputs and the variables' names; a signature's unknown (None)
dimensions get sizes from ``unknown_dims.py`` (one for all, or per input and axis), and the
model carries a notice saying which and how to choose others.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo_import.model import Model
from ember_xla.hlo_import.param_names import name_parameters
from ember_xla.hlo_import.proto import module_from_proto
from ember_xla.hlo_import.tf_packages import import_packages, load_error
from ember_xla.hlo_import.unknown_dims import UnknownDims, UnknownDimsError


def _captured_values(concrete: Any) -> list[tuple[str, np.ndarray]]:
    """(name, value) of every captured input: a variable's name, else ``captured<i>``."""
    by_handle = {id(v.handle): v for v in concrete.variables}
    values = []
    for i, cap in enumerate(concrete.captured_inputs):
        v = by_handle.get(id(cap))
        if v is None:
            try:
                values.append((f"captured{i}", np.asarray(cap.numpy())))
            except Exception:
                raise HloImportError(f"captured input {cap!r} is neither a variable nor a "
                                   "constant tensor; it cannot be bound") from None
        else:
            name = re.sub(r":0$", "", str(getattr(v, "name", "")))  # the tensor's output 0
            values.append((name or f"variable{i}", np.asarray(v.numpy())))
    return values


_UNSUPPORTED = re.compile(r"No registered '(\w+)' OpKernel")
_SPARSE_OPS = ("Sparse", "Ragged")


def compile_error(e: Exception) -> str:
    """One line saying why TensorFlow could not give XLA's HLO for a function, naming the ops
    XLA has no kernel for (its message buries them in node names) and what to export
    instead."""
    text = " ".join(str(e).split()) or type(e).__name__
    ops = sorted(set(_UNSUPPORTED.findall(text)))
    head = "TensorFlow could not compile the function with XLA: "
    dense = ("export from dense [B, L] ids and a mask, or flat ids with segment ids "
             "(docs/IDIOMS.md)")
    table = ("it runs preprocessing XLA cannot compile (a hash table or string op: "
             "StringLookup, IntegerLookup, Hashing, tf.lookup); keep that preprocessing outside "
             "the exported signature and export the model from integer ids")
    if ops:
        hint = ""
        if any(o.startswith(_SPARSE_OPS) for o in ops):
            hint = (f"; sparse and ragged inputs (tf.nn.embedding_lookup_sparse, "
                    f"RaggedTensor) compile to ops XLA lacks: {dense}")
        elif any(o.startswith("Segment") for o in ops):
            hint = ("; a sorted segment op's result size depends on its segment ids "
                    "(tf.math.segment_*, also inside tf.nn.embedding_lookup_sparse with "
                    "weights): use tf.math.unsorted_segment_* with num_segments, or "
                    f"{dense}")
        elif any(o.startswith(("LookupTable", "HashTable", "AsString", "StringToHash"))
                 for o in ops):
            hint = f"; {table}"
        return f"{head}XLA has no kernel for {', '.join(ops)}{hint}"
    if "compile-time constant" in text and "Ragged" in text:
        return (f"{head}a RaggedTensor's shapes depend on its values, which XLA needs at "
                f"compile time; {dense}")
    if "is_initialized" in text and "RET_CHECK" in text:
        return head + table
    return head + text[:300]


def from_tf_function(fn: Any, *args: Any, source: str = "") -> Model:
    """Import a ``tf.function`` for ``args`` (tensors, arrays or ``tf.TensorSpec``s)."""
    import tensorflow as tf

    if not hasattr(fn, "experimental_get_compiler_ir"):
        fn = tf.function(fn, jit_compile=True)
    targs = [a if isinstance(a, tf.TensorSpec) else tf.constant(a) for a in args]
    try:
        proto = fn.experimental_get_compiler_ir(*targs)(stage="hlo_serialized")
        concrete = fn.get_concrete_function(*targs)
    except Exception as e:
        raise HloImportError(compile_error(e), source or None) from None
    src = source or f"tf:{getattr(fn, '__name__', 'function')}"
    module = module_from_proto(bytes(proto), src)
    n_user = len(targs)
    captured = _captured_values(concrete)
    bound = {n_user + i: v for i, (_, v) in enumerate(captured)}
    names = [getattr(a, "name", None) or f"arg{i}" for i, a in enumerate(targs)]
    model = Model(module, src, bound, names)
    name_inputs(model, names + [n for n, _ in captured])
    return model


def name_inputs(model: Model, names: list[str]) -> None:
    """Parameter ``i`` is named after ``names[i]`` (``Model.source_names`` keeps them as
    given, the parameters take them as HLO identifiers)."""
    model.source_names = dict(enumerate(names))
    name_parameters(model.module, model.source_names)


def _fixed_dims(key: str, spec: Any, unknown: UnknownDims) -> list[int]:
    return [unknown.size(key, a) if d is None else d for a, d in enumerate(spec.shape.as_list())]


def _concrete_spec(key: str, spec: Any, unknown: UnknownDims) -> Any:
    import tensorflow as tf

    return tf.TensorSpec(_fixed_dims(key, spec, unknown), spec.dtype, spec.name)


def unknown_dim_notice(where: str, specs: dict[str, Any],
                       unknown_dim: int | str | UnknownDims) -> str | None:
    """One line naming the signature inputs with unknown dimensions, the sizes they were
    given and how to choose others (None if no input has one)."""
    unknown = UnknownDims.parse(unknown_dim)
    parts, sizes = [], set()
    for key, spec in sorted(specs.items()):
        if spec.shape.rank is None:
            raise HloImportError(f"signature input {key!r} has an unknown rank; only unknown "
                                 "dimensions can be given a size", where)
        dims = spec.shape.as_list()
        if None in dims:
            fixed = _fixed_dims(key, spec, unknown)
            sizes.update(f for f, d in zip(fixed, dims, strict=True) if d is None)
            shown = ", ".join("?" if d is None else str(d) for d in dims)
            parts.append(f"{key!r} [{shown}] -> [{', '.join(map(str, fixed))}]")
    if not parts:
        return None
    built = (f"built with size {sizes.pop()}" if len(sizes) == 1
             else f"built with sizes from --unknown_dim={unknown}")
    return (f"{where}: unknown dimensions {built}: {', '.join(parts)}; choose another with "
            "--unknown_dim=N, or one dimension's with --unknown_dim=N,INPUT:AXIS=SIZE")


def output_names(structured: Any) -> list[str]:
    """A signature's output keys in the order its outputs are flattened (``tf.nest`` sorts a
    dict's keys); empty when the outputs are not a flat dict of tensors."""
    if isinstance(structured, dict) and all(isinstance(k, str) for k in structured):
        import tensorflow as tf

        if all(isinstance(v, tf.TensorSpec | tf.Tensor) for v in structured.values()):
            return sorted(structured)
    return []


def with_updated_variables(model: Model, names: list[str]) -> list[str]:
    """``names`` (the signature's outputs) followed by a name for each output XLA added after
    them: a variable the function assigns (a training step's tables, slots and step counter),
    returned as its new value and aliased with its parameter -- ``<variable>:updated``. Empty
    when an added output aliases no parameter (``arr_<i>`` names then)."""
    root = model.module.entry.root.result.type
    count = len(root.tuple_shapes) if root.is_tuple else 1
    if not names or count <= len(names):
        return names
    by_output = {tuple(e.get("output_shape_index", [])): int(e.get("parameter_number", -1))
                 for e in model.module.attributes.get("input_output_alias", {}).get(
                     "entries", [])}
    extra = []
    for i in range(len(names), count):
        num = by_output.get((i,))
        if num is None or num not in model.source_names:
            return []
        extra.append(f"{model.source_names[num]}:updated")
    return names + extra


def _signature_caller(sig: Any, keys: list[str]) -> Any:
    def call(*xs: Any) -> Any:
        return sig(**dict(zip(keys, xs, strict=True)))

    return call


def from_saved_model(path: str, signature: str | None = None,
                     unknown_dim: int | str | UnknownDims = 8,
                     tf_import: Sequence[str] = ()) -> dict[str, Model]:
    """Import every serving signature (or one) of a SavedModel directory, after importing
    the packages ``tf_import`` names (``tf_packages.py``).

    Unknown (None) dimensions in a signature take their size from ``unknown_dim``
    (``unknown_dims.py``: one size for all, or per input and axis); an entry that names no
    unknown dimension of any imported signature is an error.
    """
    try:
        unknown = UnknownDims.parse(unknown_dim)
    except UnknownDimsError as e:
        raise HloImportError(str(e), path) from None
    import tensorflow as tf

    if not os.path.isdir(path):
        raise HloImportError("not a directory; expected a SavedModel directory", path)
    if not (os.path.exists(os.path.join(path, "saved_model.pb"))
            or os.path.exists(os.path.join(path, "saved_model.pbtxt"))):
        raise HloImportError("no saved_model.pb here; expected a SavedModel directory", path)
    import_packages(tf_import, path)
    try:
        loaded = tf.saved_model.load(path)
    except Exception as e:
        raise HloImportError(load_error(e), path) from None
    sigs = dict(getattr(loaded, "signatures", {}) or {})
    if not sigs:
        raise HloImportError("the SavedModel has no serving signatures; export it with "
                           "signatures={'serving_default': ...}", path)
    if signature is not None:
        if signature not in sigs:
            raise HloImportError(f"no signature {signature!r} (have: {', '.join(sorted(sigs))})",
                               path)
        sigs = {signature: sigs[signature]}
    out: dict[str, Model] = {}
    unused = None
    for _, sig in sorted(sigs.items()):
        left = set(unknown.unused(sig.structured_input_signature[1]))
        unused = left if unused is None else unused & left
    if unused:
        raise HloImportError(f"--unknown_dim names no unknown dimension of a signature input: "
                             f"{', '.join(sorted(unused))}", path)
    for name, sig in sorted(sigs.items()):
        _, kw_specs = sig.structured_input_signature
        keys = sorted(kw_specs)
        where = f"{path}[{name}]"
        notice = unknown_dim_notice(where, kw_specs, unknown)  # refuses an unknown rank
        specs = [_concrete_spec(k, kw_specs[k], unknown) for k in keys]

        wrapped = tf.function(_signature_caller(sig, keys), jit_compile=True)
        model = from_tf_function(wrapped, *specs, source=where)
        model.input_names = keys
        name_inputs(model, keys + [model.source_names[i]
                                   for i in range(len(keys), len(model.source_names))])
        model.output_names = with_updated_variables(model, output_names(sig.structured_outputs))
        model.notices = [notice] if notice else []
        out[name] = model
    return _distinct(out, path)


#: The signature kept when several compute the same (Keras 3's ``model.export`` writes
#: ``serve`` and ``serving_default`` for one function).
PREFERRED_SIGNATURE = "serving_default"


def _function_text(m: Model) -> str:
    """The module's HLO without the module's and the entry's names (TF's function names)."""
    from ember_xla.hlo.printer import print_module

    text = print_module(m.module).split("\n", 1)[1]
    return text.replace(m.module.entry.name, "<entry>")


def _same_function(a: Model, b: Model, texts: dict[int, str]) -> bool:
    """Same inputs, outputs, variables and HLO (``texts``: each model's ``_function_text``)."""
    return (a.input_names == b.input_names and a.output_names == b.output_names
            and a.source_names == b.source_names and texts[id(a)] == texts[id(b)]
            and a.bound.keys() == b.bound.keys()
            and all(np.array_equal(a.bound[k], b.bound[k]) for k in a.bound))


def _distinct(models: dict[str, Model], path: str) -> dict[str, Model]:
    """``models`` with signatures that compute the same as another dropped (the preferred name
    kept), each noted on the one kept: one rewrite, one output folder."""
    order = sorted(models, key=lambda n: (n != PREFERRED_SIGNATURE, n))
    texts = {id(m): _function_text(m) for m in models.values()} if len(models) > 1 else {}
    kept: dict[str, Model] = {}
    for name in order:
        same = next((k for k in kept if _same_function(kept[k], models[name], texts)), None)
        if same is None:
            kept[name] = models[name]
            continue
        kept[same].notices.append(f"{path}[{name}]: the same function as [{same}] (same "
                                  f"inputs, outputs, variables and HLO); imported once, as "
                                  f"[{same}]")
    return {n: kept[n] for n in sorted(kept)}
