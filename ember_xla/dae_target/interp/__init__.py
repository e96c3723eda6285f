"""Interpreters of the Ember levels (one module per dialect family); see docs/IR.md."""
