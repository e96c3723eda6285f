"""The DAE emulator: runs programs of the ``ember_xla.dae`` format on a machine of
``ember_xla.machines``. Functional execution (``reference``, Python; ``executor_cc``, C++), the
timing model of one core (``timing``, ``memory``; ``timing_cc``, C++), reports and traces, the
emulated clusters inside XLA (``xla_call``) and the multi-core NPU (``npu``). It imports no part
of the compiler (``dae_target``)."""
