"""The private Ray hook (loop_agents/patches/ray_token_auth.py): its target exists on the pinned Ray; another Ray
(faked) or a moved function is one warning line and no call."""

from __future__ import annotations

import pytest

from loop_agents.patches import ray_token_auth


def test_the_hook_knows_the_pinned_ray_and_its_target_exists():
    from importlib.metadata import version

    assert version("ray") in ray_token_auth.KNOWN_VERSIONS
    assert ray_token_auth.mismatch(version("ray")) is None


def test_the_hook_runs_on_the_pinned_ray(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the function then only reads the mode: nothing enabled
    assert ray_token_auth.use_ray_token_if_available() is True


def test_another_ray_is_one_warning_and_no_call(capsys, monkeypatch):
    def must_not_run(**_):
        raise AssertionError("called on an unknown Ray")

    module = pytest.importorskip(ray_token_auth.MODULE)
    monkeypatch.setattr(module, ray_token_auth.FUNCTION, must_not_run)
    assert ray_token_auth.use_ray_token_if_available(installed="9.9.9") is False
    assert capsys.readouterr().err.splitlines() == [
        "[loop_agents] warning: Ray hook ray_token_auth knows ray 2.60.0 and this is ray 9.9.9: joining without "
        "it (set RAY_AUTH_MODE=token if the cluster wants Ray's token)"
    ]
    monkeypatch.delattr(module, ray_token_auth.FUNCTION)
    assert ray_token_auth.use_ray_token_if_available() is False
    assert f"{ray_token_auth.MODULE} has no {ray_token_auth.FUNCTION}" in capsys.readouterr().err
