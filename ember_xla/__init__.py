"""ember-xla: compile the embedding operations of JAX/TF models into ember custom-calls."""
