"""Load the sibling idiom zoo, library corpus and training-step corpora once, as
``idiom_models``, ``library_models``, ``training_steps`` and ``training_models`` (with the
per-library modules of the latter, ``training_corpus`` first; the tests folder is not a
package; pytest imports this conftest before the test modules beside it)."""

from helper_modules import load_helper

for _name in ("idiom_models", "library_models", "training_steps", "training_corpus",
              "training_flax", "training_keras", "training_idioms", "training_jax",
              "training_models"):
    load_helper(f"rewrites/{_name}.py")
