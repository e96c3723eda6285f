"""Globs -> model inputs: stable keys, SavedModel folders, content hashes; typos are errors."""

import pytest

from ember_xla.batch.inputs import InputError, content_hash, discover


def test_keys_are_relative_to_the_glob_and_stable(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.pb").write_bytes(b"x")
    (tmp_path / "a" / "sm").mkdir()
    (tmp_path / "a" / "sm" / "saved_model.pb").write_bytes(b"y")
    (tmp_path / "b.hlo").write_text("HloModule m")
    got = discover([f"{tmp_path}/a/*", f"{tmp_path}/b.hlo"])
    assert [(m.key, m.is_dir) for m in got] == [("b.hlo", False), ("m.pb", False),
                                               ("sm", True)]
    nested = discover([f"{tmp_path}/**/*.pb"])
    assert [m.key for m in nested] == ["a__m.pb", "a__sm__saved_model.pb"]
    # the same file through two globs is one model
    assert len(discover([f"{tmp_path}/a/m.pb", f"{tmp_path}/a/*.pb"])) == 1


def test_a_glob_matching_nothing_is_an_error(tmp_path):
    with pytest.raises(InputError, match="matches no file"):
        discover([f"{tmp_path}/*.pb"])
    with pytest.raises(InputError, match="no globs"):
        discover([])


def test_duplicate_keys_are_an_error(tmp_path):
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "m.pb").write_bytes(b"1")
    with pytest.raises(InputError, match="same model key 'm.pb'"):
        discover([f"{tmp_path}/x/*", f"{tmp_path}/y/*"])


def test_content_hash_of_files_and_folders(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"abc")
    h1 = content_hash(str(tmp_path / "d"))
    (tmp_path / "d" / "f").write_bytes(b"abd")
    assert content_hash(str(tmp_path / "d")) != h1
    (tmp_path / "g").write_bytes(b"abc")
    import hashlib

    assert content_hash(str(tmp_path / "g")) == hashlib.sha256(b"abc").hexdigest()


def test_the_jobs_own_output_folder_is_no_input(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.pb").write_bytes(b"a")
    out = tmp_path / "m" / "out"
    (out / "models").mkdir(parents=True)
    (out / "models" / "a.pb__rewritten.pb").write_bytes(b"r")
    pattern = str(tmp_path / "m" / "**" / "*.pb")
    assert len(discover([pattern])) == 2
    assert [mi.key for mi in discover([pattern], str(out))] == ["a.pb"]
