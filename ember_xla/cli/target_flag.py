"""The ``--target`` flag shared by ``emulate``, ``place`` and ``batch --actions=...,emulate``.

Defined once here so the commands that read it agree on its meaning and help text.
"""

from absl import flags

flags.DEFINE_string(
    "target", None,
    "emulate/place (and batch --actions=...,emulate): the target, a shipped name (tmu, tiny, "
    "npu) or a .toml file (configs/README.md); default tmu for emulate, npu for place.")
