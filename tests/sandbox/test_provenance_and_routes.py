"""The host's output signature and the API process's route allow list, on hand-made inputs."""

from __future__ import annotations

import os

import pytest

from loop_agents.envs.appworld.host import provenance
from loop_agents.envs.appworld.host.api_routes import _template_regex


def outputs(tmp_path):
    out = tmp_path / "experiments" / "outputs" / "exp" / "tasks" / "a_1"
    (out / "dbs").mkdir(parents=True)
    (out / "dbs" / "simple_note.jsonl").write_text('["DELETE FROM note WHERE id = ?", [3], false]\n')
    (out / "dbs" / "model_hashes.json").write_text('{"simple_note": {"Note": 4}}')
    return out


def test_a_signed_folder_verifies_and_any_change_is_named(tmp_path):
    key = provenance.ensure_key(tmp_path)
    assert len(key) == 32 and oct(provenance.key_path(tmp_path).stat().st_mode & 0o777) == "0o600"
    assert provenance.ensure_key(tmp_path) == key  # made once
    out = outputs(tmp_path)
    provenance.sign(key, out, "a_1", "exp")
    assert provenance.problem(key, out, "a_1") == ""
    (out / "evaluation").mkdir()
    (out / "evaluation" / "report.md").write_text("scored later")  # the evaluator's own reports do not count
    assert provenance.problem(key, out, "a_1") == ""
    assert "does not match" in provenance.problem(key, out, "a_2")  # moved to another task
    assert "does not match" in provenance.problem(os.urandom(32), out, "a_1")  # another root's key
    (out / "dbs" / "simple_note.db").write_bytes(b"forged")  # AppWorld's loader prefers a .db
    assert "does not match" in provenance.problem(key, out, "a_1")
    (out / "dbs" / "simple_note.db").unlink()
    (out / "dbs" / "model_hashes.json").write_text('{"simple_note": {"Note": 3}}')
    assert "does not match" in provenance.problem(key, out, "a_1")
    (out / provenance.SIGNATURE_NAME).unlink()
    assert "is missing" in provenance.problem(key, out, "a_1")


@pytest.mark.parametrize(
    ("template", "path", "allowed"),
    [
        ("/spotify/songs/{song_id}", "/spotify/songs/12", True),
        ("/spotify/songs/{song_id}", "/spotify/songs/12/x", False),
        ("/spotify/songs/{song_id}", "/spotify/songs/", False),
        ("/spotify/songs/{song_id}", "/spotify/songs/%2e%2e", False),
        ("/spotify/songs/{song_id}", "/spotify/songs/1?x=2", False),
        ("/spotify/playlists/{playlist_id}/songs/{song_id}", "/spotify/playlists/1/songs/2", True),
        ("/supervisor/profile", "/supervisor/profile", True),
        ("/supervisor/profile", "/supervisor/profileX", False),
    ],
)
def test_route_templates_match_one_segment_per_parameter(template, path, allowed):
    assert bool(_template_regex(template).fullmatch(path)) is allowed
