"""The passes of the Ember levels; importing this package registers them by name (each module
registers its pass with ``ir.passes.register_pass``)."""

from ember_xla.dae_target.passes import (  # noqa: F401  (t6b: SLC/SLCV passes; t6c: decouple)
    bufferize,
    decouple,
    dedup,
    hoist,
    queue_align,
    simplify_mem,
    vectorize,
)
