"""vLLM's general plugin `loop_agents_patches`: arm the patches the launcher asked for, in every vLLM process.

vLLM calls `register()` through the entry point group `vllm.general_plugins` (declared in pyproject.toml) in the
api_server (while it builds its argument parser, before the app and its middleware exist), in EngineCore and in
every worker (before the worker class, its model runner and its message queues are made); see
vllm/plugins/__init__.py `load_general_plugins`. An exception in a plugin's function is not caught there, so a
refused patch ends the api_server before it serves anything.

A patch applies only where its variable is set (`VllmPatch.env`, set by `inference.launch.server_environment`),
so a vLLM started by anyone else in this environment is untouched. The server's main process prints one line
listing the patches it checked and armed for this vLLM; each applies when its target module is imported.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points

from loop_agents.patches import api_key_guard, cpu_generator_rewind, cpu_lora_ops, shm_busy_loop
from loop_agents.patches.vllm_patch import VllmPatch, arm, installed_vllm_version

NAME = "loop_agents_patches"  # the entry point's name, as `VLLM_PLUGINS` lists it
GROUP = "vllm.general_plugins"
VALUE = "loop_agents.patches.vllm_plugin:register"
NOT_REGISTERED = (
    f"loop_agents' vLLM plugin ({GROUP}: {NAME}) is not registered in this environment, so no patch of vLLM "
    "would apply: install the project (bash scripts/install.sh, or pip install -e .)"
)
PATCHES: tuple[VllmPatch, ...] = (
    api_key_guard.PATCH,
    cpu_generator_rewind.PATCH,
    cpu_lora_ops.PATCH,
    shm_busy_loop.PATCH,
)


def registered() -> bool:
    """vLLM will find `register` through the entry point (the project is installed with its pyproject)."""
    return any(ep.value == VALUE for ep in entry_points(group=GROUP, name=NAME))


def arm_requested(environ: Mapping[str, str] = os.environ, installed: str | None = None) -> list[VllmPatch]:
    """Check and arm every patch `environ` asks for; the ones armed (a speed patch that does not fit is left out,
    one that must apply and does not fit raises PatchRefused)."""
    installed = installed or installed_vllm_version()
    return [patch for patch in PATCHES if patch.armed(environ) and arm(patch, installed)]


def summary_line(armed: list[VllmPatch], installed: str | None) -> str:
    names = ", ".join(f"{patch.name} ({patch.kind})" for patch in armed) or "none"
    return f"[loop_agents] vLLM patches for vllm {installed}: {names}"


def register() -> None:
    """The entry point: arm the requested patches; the server's main process says which in one line."""
    installed = installed_vllm_version()
    armed = arm_requested(os.environ, installed)
    if multiprocessing.parent_process() is None:  # the api_server, not EngineCore or a worker it spawned
        print(summary_line(armed, installed), file=sys.stderr, flush=True)
