"""Built-in example models (small DLRM-style recommenders in JAX and TensorFlow)."""
