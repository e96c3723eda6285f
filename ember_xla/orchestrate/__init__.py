"""The orchestration layer, above the libraries and below the CLI and batch: what a command
does to a model, written once. Compile a rewritten model's clusters for a DAE machine, emulate
or place a model and verify its outputs, and ``jit`` (native, emulated or placed)."""
