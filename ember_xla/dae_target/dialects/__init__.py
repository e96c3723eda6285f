"""Dialects of the Ember levels, registered lazily by name: the execute-side ``func``, ``arith``,
``scf``, ``memref``, ``vector`` and the Ember levels ``slc``, ``slcv``, ``dlc``."""

from ember_xla.ir.dialect import register_lazy_dialect

for _name in ("func", "arith", "scf", "memref", "vector", "slc", "slcv", "dlc"):
    register_lazy_dialect(_name, f"ember_xla.dae_target.dialects.{_name}")
