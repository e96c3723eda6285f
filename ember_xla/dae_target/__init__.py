"""The DAE compiler path (after Ember): an ember custom-call's cluster -> SLC -> vectorized SLC
(SLCV) -> DLC, with Ember's optimization passes and a reference interpreter at every level.
See docs/IR.md and docs/ARCHITECTURE.md."""
