"""Shared test setup: quiet TensorFlow, CPU only, and a helper to run HLO on XLA:CPU."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
