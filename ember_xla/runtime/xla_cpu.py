"""The one place that touches private jax/jaxlib APIs (pinned jax/jaxlib 0.10.x).

HloModuleProto bytes -> StableHLO (``hlo_to_stablehlo``, with HLO's spelling of a size-1 dim's
broadcast folded back: ``_stablehlo``) -> PjRt CPU executable -> execute;
and ``rewriting_jit``: jax.jit's own C++ dispatch (signature, cache, transfers, donation)
around a module a hook rewrote, with ``rewritten_lowering`` its ``.lower()``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

#: The jaxlib library holding XLA:CPU's runtime, whose result buffers the kernels' cache serves.
RUNTIME_LIBRARY = "libjax_common.so"


def cache_result_buffers() -> int:
    """Serve XLA:CPU's large result and temporary buffers from the kernel library's cache
    (``ember_xla.native.buffer_cache``); idempotent. Returns the call sites redirected."""
    from ember_xla.native import buffer_cache

    return buffer_cache.install(RUNTIME_LIBRARY)


class XlaError(RuntimeError):
    """XLA rejected a module when compiling or running it."""


@functools.cache
def _backend() -> tuple[Any, Any]:
    import jax
    import jax.extend.backend

    jax.config.update("jax_platforms", "cpu")
    be = jax.extend.backend.get_backend("cpu")
    return be, be.devices()[0]


class Executable:
    """A compiled module; call ``run(inputs)`` with numpy arrays in entry-parameter order."""

    def __init__(self, loaded: Any) -> None:
        self._loaded = loaded

    def run_device(self, inputs: list) -> list:
        """Run on arrays (numpy or jax); returns jax arrays on the CPU device. Arrays already
        on the device are passed as they are: a ``device_put`` of one under x64 costs 16-70 us
        (measured, more for larger arrays), which a timed run of a small module would time."""
        import jax

        _, dev = _backend()
        try:
            with jax.enable_x64(True):  # else device_put narrows 64-bit inputs to 32 bits
                bufs = [a if isinstance(a, jax.Array) and a.devices() == {dev}
                        else jax.device_put(a, dev) for a in inputs]
            return self._loaded.execute(bufs)
        except Exception as e:
            raise XlaError(f"XLA:CPU execution failed: {e}") from None

    def optimized_hlo(self) -> str:
        """The HLO text of the module as XLA optimized it (fusions, copies, aliasing)."""
        return "\n".join(m.to_string() for m in self._loaded.hlo_modules())

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in self.run_device([np.asarray(a) for a in inputs])]


def _stablehlo(proto: bytes) -> Any:
    """``proto`` as the StableHLO module (an ``ir.Module``, in jax's MLIR context) that converts
    back to the same HLO: ``hlo_to_stablehlo`` spells HLO's expansion of a size-1 dim
    (``broadcast_in_dim`` [N,1] -> [N,D], which HLO writes as an identity broadcast, a reshape
    dropping the 1 and a broadcast) as those three ops, and compiling folds them into one
    broadcast of [N]; XLA:CPU then optimizes the module otherwise (``x / y[:, None]`` keeps two
    divides where jax.jit's module shares one reciprocal: other bits). ``_fold_size1_chains``
    restores the one ``broadcast_in_dim``."""
    from jaxlib import _jax

    return _parsed(_jax.mlir.hlo_to_stablehlo(proto))[0]


def _parsed(bytecode: bytes) -> tuple[Any, int]:
    """The StableHLO ``bytecode`` parsed, its size-1 chains folded; (module, number folded)."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(bytecode)
        folded = _fold_size1_chains(module)
    return module, folded


def _op(value: Any) -> Any:
    owner = value.owner
    return getattr(owner, "operation", owner)


def _fold_size1_chains(module: Any) -> int:
    """``broadcast_in_dim(reshape(broadcast_in_dim(x) identity))``, the reshape dropping every
    size-1 dim of ``x`` -> ``broadcast_in_dim(x)`` expanding them (each into a result dim the
    outer broadcast does not use: where is immaterial, a size-1 dim's one value goes
    everywhere). The number folded."""
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    ops: list[Any] = []
    module.operation.walk(lambda o: (ops.append(getattr(o, "operation", o)),
                                     ir.WalkResult.ADVANCE)[1])
    folded = 0
    for op in ops:
        if op.name != "stablehlo.broadcast_in_dim":
            continue
        reshape = _op(op.operands[0])
        if getattr(reshape, "name", "") != "stablehlo.reshape":
            continue
        ident = _op(reshape.operands[0])
        if getattr(ident, "name", "") != "stablehlo.broadcast_in_dim":
            continue
        x = ident.operands[0]
        xs = list(ir.RankedTensorType(x.type).shape)
        kept = [i for i, d in enumerate(xs) if d != 1]
        inner = list(ir.DenseI64ArrayAttr(ident.attributes["broadcast_dimensions"]))
        mid = list(ir.RankedTensorType(reshape.results[0].type).shape)
        outer = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
        rank = ir.RankedTensorType(op.results[0].type).rank
        unused = iter(d for d in range(rank) if d not in outer)
        if (list(ir.RankedTensorType(ident.results[0].type).shape) != xs
                or inner != list(range(len(xs))) or mid != [xs[i] for i in kept]
                or len(kept) == len(xs) or rank - len(outer) < len(xs) - len(kept)):
            continue
        mapped = iter(outer)
        dims = [next(mapped) if d != 1 else next(unused) for d in xs]
        with ir.InsertionPoint(op), op.location:
            new = hlo.BroadcastInDimOp(op.results[0].type, x, ir.DenseI64ArrayAttr.get(dims))
        op.results[0].replace_all_uses_with(new.result)
        op.erase()
        folded += 1
    return folded


def _folded(proto: bytes) -> bytes:
    """``proto`` as StableHLO bytecode with the size-1 chains folded (``_stablehlo``): the
    converted bytecode itself when there is none to fold, or when MLIR refuses to parse it (an
    invalid module, whose error compile_and_load words)."""
    import io

    from jaxlib import _jax

    bytecode = _jax.mlir.hlo_to_stablehlo(proto)
    try:
        module, folded = _parsed(bytecode)
    except Exception:  # an invalid module: compile_and_load says why
        return bytecode
    if not folded:
        return bytecode
    out = io.BytesIO()
    module.operation.write_bytecode(out)
    return out.getvalue()


def compile_proto(proto: bytes, options: dict[str, bool | int | str] | None = None) -> Executable:
    """Compile serialized HloModuleProto bytes for the CPU; ``options`` are XLA debug options
    (e.g. ``{"xla_allow_excess_precision": False}``) overriding the defaults."""
    from jaxlib import _jax

    be, dev = _backend()
    opts = _jax.CompileOptions()
    if options:
        opts.env_option_overrides = sorted(options.items())
    try:
        loaded = be.compile_and_load(_folded(proto), _jax.DeviceList((dev,)), opts)
    except Exception as e:
        raise XlaError(f"XLA:CPU compilation failed: {e}") from None
    return Executable(loaded)


def xla_parse_text(text: str) -> bytes:
    """XLA's own HLO text parser (used to cross-check ours): text -> HloModuleProto bytes."""
    from jaxlib import _hlo

    try:
        return _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    except Exception as e:
        raise XlaError(f"XLA's HLO parser rejected the text: {e}") from None


def xla_proto_to_text(proto: bytes) -> str:
    """XLA's own printer: HloModuleProto bytes -> HLO text."""
    from jaxlib import _hlo

    return _hlo.HloModule.from_serialized_hlo_module_proto(proto).to_string()


# --- jax.jit's own dispatch running a rewritten module (jax._src: pjit, pxla, stages) ---

#: ``(HloModuleProto bytes of the lowered function, its name) -> (the proto to compile instead,
#: or None to compile jax's own module; a report)``.
RewriteHook = Callable[[bytes, str], tuple[bytes | None, Any]]


def _with_module(computation: Any, proto: bytes) -> Any:
    """A copy of jax's lowering (a ``MeshComputation``: module + compile arguments) whose module
    is ``proto``: the same parameters, outputs, donation and compile options."""
    import copy

    try:
        module = _stablehlo(proto)
    except Exception as e:
        raise XlaError(f"the rewritten module does not convert to StableHLO: {e}") from None
    new = copy.copy(computation)
    new._hlo, new._executable = module, None
    return new


def _rewrite_lowering(computation: Any, hook: RewriteHook, name: str) -> tuple[Any, Any]:
    proto = computation.hlo().as_serialized_hlo_module_proto()
    new_proto, report = hook(proto, name)
    return (computation if new_proto is None else _with_module(computation, new_proto)), report


def rewriting_jit(fn: Callable, jit_kwargs: dict[str, Any], hook: RewriteHook,
                  record: Callable[[str, Any], None], label: str = "jit") -> tuple[Any, Any]:
    """``(dispatcher, jax.jit(fn, **jit_kwargs))``: the dispatcher is jax's own C++ jit
    function (signature handling, cache, argument transfer and donation exactly as
    ``jax.jit``'s) whose cache miss compiles the module ``hook`` returns and ``record``s its
    report under a signature text. Under another transformation it is ``jax.jit`` itself.
    jax's error about an argument it cannot interpret is raised on one line after ``label``."""
    import jax
    from jax._src import config, core, dispatch, pjit, tree_util
    from jax._src.interpreters import mlir, pxla
    from jaxlib import _jax

    plain = jax.jit(fn, **jit_kwargs)
    info, name = plain._jit_info, pjit.fun_name(fn)

    def cache_miss(*args: Any, **kwargs: Any) -> tuple[Any, Any, bool]:
        if not core.trace_state_clean() or config.debug_key_reuse.value:
            return plain(*args, **kwargs), None, False
        try:
            p, args_flat = pjit._infer_params(fn, info, args, kwargs)
        except (TypeError, ValueError) as e:
            if str(e).startswith("Error interpreting argument to"):  # jax's words, one line
                raise type(e)(f"{label}: " + " ".join(str(e).split())) from None
            raise
        jaxpr = p.params["jaxpr"]
        if jaxpr.jaxpr.is_high:
            return plain(*args, **kwargs), None, False
        for a in args_flat:
            dispatch.check_arg(a)
        args_flat = [core.full_lower(a) for a in args_flat]
        params = {k: v for k, v in p.params.items() if k != "jaxpr"}
        computation = pjit._resolve_and_lower(
            [pjit.convert_to_metaty(a) for a in args_flat], jaxpr=jaxpr,
            lowering_platforms=None, lowering_parameters=mlir.LoweringParameters(),
            pgle_profiler=None, **params)
        computation, report = _rewrite_lowering(computation, hook, name)
        record(_signature_text(p.in_avals, info, args, kwargs), report)
        compiled = computation.compile()
        const_args = compiled.shard_const_args(computation.const_args)
        out_flat = compiled.unsafe_call(*const_args, *args_flat)
        fast = pjit._get_fastpath_data(compiled, p.out_tree, args_flat, out_flat, jaxpr.effects,
                                       jaxpr.consts, None, const_args)
        return tree_util.tree_unflatten(p.out_tree, out_flat), fast, False

    key = pxla.JitGlobalCppCacheKeys(
        donate_argnums=info.donate_argnums, donate_argnames=info.donate_argnames,
        device=info.device, backend=info.backend,
        in_shardings_treedef=info.in_shardings_treedef,
        in_shardings_leaves=info.in_shardings_leaves,
        out_shardings_treedef=info.out_shardings_treedef,
        out_shardings_leaves=info.out_shardings_leaves,
        in_layouts_treedef=info.in_layouts_treedef, in_layouts_leaves=info.in_layouts_leaves,
        out_layouts_treedef=info.out_layouts_treedef,
        out_layouts_leaves=info.out_layouts_leaves,
        compiler_options_kvs=info.compiler_options_kvs)
    # a cache of its own: jax's global one is keyed by the function, which jax.jit(fn) shares
    cache = _jax.PjitFunctionCache(capacity=4096)
    dispatcher = _jax.pjit(name, fn, cache_miss, info.static_argnums, info.static_argnames,
                           key, tree_util.dispatch_registry, pxla.cc_shard_arg, cache)
    return dispatcher, plain


def _signature_text(in_avals: Any, info: Any, args: tuple, kwargs: dict) -> str:
    """``f32[200,8], s32[50]`` (+ ``static: ...``): a readable name of one cache entry."""
    text = ", ".join(a.str_short() for a in in_avals)
    static = [repr(args[i]) for i in info.static_argnums if i < len(args)]
    static += [f"{k}={kwargs[k]!r}" for k in info.static_argnames if k in kwargs]
    return text + (f"; static: {', '.join(static)}" if static else "")


def rewritten_lowering(traced: Any, name: str, hook: RewriteHook) -> tuple[Any, Any]:
    """``(jax.stages.Lowered of the module hook returns, report)`` for a ``jax.stages.Traced``
    (``jax.jit(f).trace(...)``): ``.as_text()`` shows the rewritten module, ``.compile()``
    compiles it."""
    from jax._src import stages

    lowered = traced.lower()
    computation, report = _rewrite_lowering(lowered._lowering, hook, name)
    return stages.Lowered(computation, lowered.args_info, lowered.out_tree, lowered._no_kwargs,
                          lowered._in_types, lowered._out_types), report


def module_inputs(plain: Any, args: tuple, kwargs: dict) -> tuple[bytes, list, Any]:
    """``(HloModuleProto, its parameters' values in order, output tree)`` of
    ``plain(*args, **kwargs)`` (``plain`` a ``jax.jit`` function): static arguments removed,
    hoisted constants first, unused arguments pruned as jax prunes them."""
    from jax._src import pjit

    lowered = plain.trace(*args, **kwargs).lower()
    comp = lowered._lowering
    _, args_flat = pjit._infer_params(plain._fun, plain._jit_info, args, kwargs)
    kept = comp.compile_args["kept_var_idx"]
    values = [x for i, x in enumerate([*comp.const_args, *args_flat]) if i in kept]
    return comp.hlo().as_serialized_hlo_module_proto(), values, lowered.out_tree
