"""The passes of the Ember levels; importing this package registers them by name (each module
registers its pass with ``ir.passes.register_pass``)."""
