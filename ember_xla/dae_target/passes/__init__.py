"""The passes of the Ember levels; importing this package registers them by name (each module
registers its pass with ``ir.passes.register_pass``)."""

from ember_xla.dae_target.passes import vectorize  # noqa: F401, E402  (t6b's SLCV passes)
