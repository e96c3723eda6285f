"""Load the sibling helper modules of these tests (every ``*.py`` here that is not a test or
this file: ``lowering_cases``, ``slc_examples`` ...) once under their own names (the tests
folder is not a package; pytest imports this conftest before the test modules beside it)."""

from pathlib import Path

from helper_modules import load_helper

for _path in sorted(Path(__file__).parent.glob("*.py")):
    if not _path.stem.startswith("test_") and _path.stem != "conftest":
        load_helper(_path)
