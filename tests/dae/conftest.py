"""The format's tests build their programs with the compiler's case helpers
(``tests/dae_target``: ``pass_cases``, ``lowering_cases`` ...): load them the way that folder's
conftest does."""

from helper_modules import load_helper

load_helper("dae_target/conftest.py", "dae_target_helpers")
