"""Machine descriptions: the DAE cores (``configs/tmu.toml``, ``tiny.toml``) and the multi-core
NPU (``configs/npu.toml``) read from TOML into frozen, validated dataclasses (``config``), and
the NPU's per-core timing parameters derived from them (``npu``). Read by the DAE program
binder, the emulators and placement; imports nothing of theirs."""
