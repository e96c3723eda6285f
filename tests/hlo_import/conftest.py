"""Load the sibling corpus module once, as ``tests_hlo_import_corpus`` (the tests folder is not a
package; pytest imports this conftest before the test modules beside it)."""

from helper_modules import load_helper

load_helper("hlo_import/corpus.py", "tests_hlo_import_corpus")
