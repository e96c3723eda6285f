"""Compile and run HLO modules on XLA:CPU; register ember's native custom-call targets."""
