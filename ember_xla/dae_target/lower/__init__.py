"""Lowering of ember custom-call clusters to SLC; see docs/IR.md."""
