"""Sandbox modes: which layers a mode needs, the start line, strict refusal (one line, exit 2)."""

from __future__ import annotations

import pytest

from loop_agents.envs.appworld.config import DEFAULT_PYTHON, AppWorldConfig
from loop_agents.envs.appworld.server import probe_sandbox
from loop_agents.sandbox.layers import HOW_TO_ENABLE, LAYERS, SandboxUnavailable, choose

ALL = {
    "namespaces": "user+mount+pid+net+ipc+uts",
    "landlock": "abi 7",
    "seccomp": "libseccomp",
    "rlimits": "as",
}


def test_available_names_every_layer_that_is_on():
    active, missing, line = choose("available", ALL)
    assert active == list(LAYERS) and missing == []
    assert line == (
        "[sandbox] layers on: namespaces (user+mount+pid+net+ipc+uts), landlock (abi 7), seccomp (libseccomp), "
        "rlimits (as)"
    )


def test_available_warns_and_names_how_to_enable_a_missing_layer():
    offered = {**ALL, "landlock": None}
    active, missing, line = choose("available", offered)
    assert "landlock" not in active and missing == ["landlock"]
    assert "WARNING missing: landlock" in line and HOW_TO_ENABLE["landlock"] in line
    assert "\n" not in line


@pytest.mark.parametrize("layer", ["namespaces", "seccomp"])
def test_available_fails_closed_without_namespaces_or_seccomp(layer):
    with pytest.raises(SandboxUnavailable) as error:
        choose("available", {**ALL, layer: None})
    message = str(error.value)
    assert "\n" not in message and f"available mode: layer {layer!r} is missing" in message
    assert HOW_TO_ENABLE[layer] in message and "env.options.sandbox=off" in message


def test_strict_needs_landlock_scoping():
    with pytest.raises(SandboxUnavailable, match="strict mode: layer 'landlock' is missing"):
        choose("strict", {**ALL, "landlock": "abi 5"})
    active, _, _ = choose("available", {**ALL, "landlock": "abi 5"})
    assert "landlock" in active


def test_strict_refuses_with_one_line_naming_the_layer():
    with pytest.raises(SandboxUnavailable) as error:
        choose("strict", {**ALL, "namespaces": None})
    message = str(error.value)
    assert "\n" not in message and "'namespaces'" in message and "user.max_user_namespaces" in message


def test_off_is_explicit_and_warns():
    active, _, line = choose("off", ALL)
    assert active == [] and line.startswith("[sandbox] WARNING off by explicit choice")


def test_bad_mode_is_refused_by_the_config():
    with pytest.raises(ValueError, match="env.options.sandbox must be one of"):
        AppWorldConfig(sandbox="sometimes")
    with pytest.raises(ValueError, match="sandbox mode must be one of"):
        choose("sometimes", ALL)


@pytest.mark.skipif(
    not DEFAULT_PYTHON.exists(), reason="AppWorld venv missing: run scripts/install_appworld.sh"
)
def test_the_real_probe_in_strict_mode_on_this_machine(tmp_path, capsys):
    """On a kernel with every layer (this one: userns, Landlock ABI 7, libseccomp) strict starts and says so;
    on one without, it exits 2 with the host's one line."""
    (tmp_path / "data" / "tasks").mkdir(parents=True)
    config = AppWorldConfig(root=str(tmp_path), sandbox="strict")
    try:
        line = probe_sandbox(config)
    except SystemExit as exit_:
        assert exit_.code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("[sandbox] strict mode: layer") and "\n" not in err
        return
    assert line.startswith("[sandbox] layers on: namespaces") and "WARNING" not in line
    assert all(name in line for name in LAYERS)
