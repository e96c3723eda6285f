"""The ``ember-xla`` command line (absl): ``inspect``, ``rewrite``, ``run``, ``example``."""

from ember_xla.cli.main import run

__all__ = ["run"]
