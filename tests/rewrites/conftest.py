"""Load the sibling idiom zoo, library corpus and training-step corpora once, as
``idiom_models``, ``library_models``, ``training_steps`` and ``training_models`` (with the
per-library modules of the latter, ``training_corpus`` first; the tests folder is not a
package; pytest imports this conftest before the test modules beside it)."""

import importlib.util
import sys
from pathlib import Path

for _name in ("idiom_models", "library_models", "training_steps", "training_corpus",
              "training_flax", "training_jax", "training_keras", "training_models"):
    if _name not in sys.modules:
        _spec = importlib.util.spec_from_file_location(
            _name, Path(__file__).with_name(f"{_name}.py"))
        _mod = importlib.util.module_from_spec(_spec)
        sys.modules[_name] = _mod
        _spec.loader.exec_module(_mod)
