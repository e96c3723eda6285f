"""StableHLO -> HloModuleProto by XLA's own importer: a StableHLO module as MLIR text (what
``jax.jit(f).lower(...).as_text()`` prints), MLIR bytecode, or the module of a ``jax.export``
serialization (``jax.export.export(jax.jit(f))(*args).serialize()``, read back with
``jax.export.deserialize``) becomes the HLO the rest of the importer reads. jaxlib's
``mlir_module_to_xla_computation`` (pinned jaxlib 0.10.x) is private: this is the one private
jaxlib call besides ``runtime/xla_cpu.py``, which sits above the importers in the layering."""

from __future__ import annotations


class StableHloError(ValueError):
    """XLA could not read the module (the first error line XLA gave)."""


class SymbolicShapes(StableHloError):
    """The module has dynamic dimensions, which XLA:CPU does not compile (the whole message
    says what to export instead)."""


def stablehlo_to_proto(module: bytes) -> bytes:
    """The HloModuleProto bytes of a StableHLO module (MLIR text or bytecode)."""
    from jaxlib import _jax

    try:
        comp = _jax.mlir.mlir_module_to_xla_computation(module, use_tuple_args=False,
                                                        return_tuple=False)
    except Exception as e:
        if _symbolic(module):
            raise SymbolicShapes("StableHLO with symbolic (dynamic) shapes (tensor<?x...>, "
                                 "dynamic_* ops), which XLA:CPU does not compile; export it "
                                 "with concrete shapes (the batch size the model will "
                                 "serve)") from None
        first = next((ln for ln in str(e).splitlines() if "error" in ln), str(e))
        raise StableHloError(" ".join(first.split())[:300]) from None
    return comp.as_serialized_hlo_module_proto()


def _symbolic(module: bytes) -> bool:
    """Whether MLIR text has dynamic dimensions (``tensor<?x4xf32>``) or dynamic-shape ops."""
    return b"tensor<?" in module or b"x?x" in module or b"stablehlo.dynamic_" in module


def exported_stablehlo(data: bytes) -> str | None:
    """The StableHLO text of a ``jax.export`` serialization (``Exported.serialize()``), None
    when ``data`` is not one; ``StableHloError`` for an export this importer cannot take (for
    several platforms, with symbolic shapes or ordered effects: their modules take extra
    arguments)."""
    try:
        from jax import export

        exp = export.deserialize(bytearray(data))
        avals = list(exp.in_avals)
    except Exception:
        return None
    if len(exp.platforms) > 1:
        raise StableHloError(f"a jax.export for platforms {list(exp.platforms)}, whose module "
                             "takes the platform as an argument; export it for the CPU only: "
                             "jax.export.export(jax.jit(f), platforms=['cpu'])")
    if any(not isinstance(d, int) for a in avals for d in getattr(a, "shape", ())):
        raise StableHloError("a jax.export with symbolic shapes; export it with concrete "
                             "shapes (the batch size the model will serve)")
    if exp.ordered_effects:
        raise StableHloError("a jax.export with ordered effects, whose module takes tokens")
    return exp.mlir_module()
