"""StableHLO -> HloModuleProto by XLA's own importer: a StableHLO module as MLIR text (what
``jax.jit(f).lower(...).as_text()`` prints) or MLIR bytecode becomes the HLO the rest of the
importer reads. jaxlib's ``mlir_module_to_xla_computation`` (pinned jaxlib 0.10.x) is private:
this is the one private jaxlib call besides ``runtime/xla_cpu.py``, which sits above the
importers in the layering."""

from __future__ import annotations


class StableHloError(ValueError):
    """XLA could not read the module (the first error line XLA gave)."""


def stablehlo_to_proto(module: bytes) -> bytes:
    """The HloModuleProto bytes of a StableHLO module (MLIR text or bytecode)."""
    from jaxlib import _jax

    try:
        comp = _jax.mlir.mlir_module_to_xla_computation(module, use_tuple_args=False,
                                                        return_tuple=False)
    except Exception as e:
        first = next((ln for ln in str(e).splitlines() if "error" in ln), str(e))
        raise StableHloError(" ".join(first.split())[:300]) from None
    return comp.as_serialized_hlo_module_proto()
