"""A manifest entry vouches for a model only while its input, settings and every output file
are unchanged; outputs are switched in whole."""

import os

from ember_xla.batch import manifest


def _entry(out, key, stage):
    files = manifest.hash_tree(stage)
    manifest.switch_in(str(out), key, stage)
    e = {"key": key, "status": "ok", "input_hash": "i", "settings_hash": "s", "files": files}
    manifest.write_entry(str(out), e)
    return manifest.read_entry(str(out), key)


def test_done_only_while_everything_matches(tmp_path):
    stage = manifest.new_stage(str(tmp_path), "m")
    with open(os.path.join(stage, "report.json"), "w") as f:
        f.write("{}")
    e = _entry(tmp_path, "m", stage)
    assert manifest.is_done(str(tmp_path), e, "i", "s")
    assert not manifest.is_done(str(tmp_path), e, "other input", "s")
    assert not manifest.is_done(str(tmp_path), e, "i", "other settings")
    (tmp_path / "models" / "m" / "report.json").write_text("{ }")  # changed output
    assert not manifest.is_done(str(tmp_path), e, "i", "s")
    (tmp_path / "models" / "m" / "report.json").unlink()            # missing output
    assert not manifest.is_done(str(tmp_path), e, "i", "s")
    assert not manifest.is_done(str(tmp_path), None, "i", "s")


def test_switch_in_replaces_and_removes_whole_folders(tmp_path):
    old_umask = os.umask(0o022)
    try:
        for content in ("old", "new"):
            stage = manifest.new_stage(str(tmp_path), "m")
            with open(os.path.join(stage, "f"), "w") as f:
                f.write(content)
            manifest.switch_in(str(tmp_path), "m", stage)
    finally:
        os.umask(old_umask)
    assert (tmp_path / "models" / "m" / "f").read_text() == "new"
    assert (tmp_path / "models" / "m").stat().st_mode & 0o777 == 0o755  # the umask's, not 0700
    manifest.switch_in(str(tmp_path), "m", None)
    assert not (tmp_path / "models" / "m").exists()
    assert os.listdir(tmp_path / manifest.STAGING) == []


def test_unreadable_entries_are_not_trusted(tmp_path):
    os.makedirs(tmp_path / "manifest")
    (tmp_path / "manifest" / "m.json").write_text('{"key": "m", "status": "o')
    assert manifest.read_entry(str(tmp_path), "m") is None
    (tmp_path / "manifest" / "m.json").write_text('{"key": "other"}')
    assert manifest.read_entry(str(tmp_path), "m") is None
