"""Patch a module the moment it is first imported (before anyone imports from it), or at once if it already was.

`vllm_patch.arm` uses it so a patch touches only the processes that import its target (the CPU model runner is
imported by the worker alone; importing it up front would cost every other process of the server ~2 s) and lands
before vLLM binds names from the module (the punica wrapper imports the LoRA ops by name).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `target` through the other finders, runs it, then calls `patch(module)` and leaves `sys.meta_path`.

    Finding the module without importing it (`importlib.util.find_spec`, as `vllm_patch.missing_module` does)
    leaves the hook in place for the real import."""

    def __init__(self, target: str, patch: Callable[[ModuleType], None]) -> None:
        self.target = target
        self.patch = patch
        self._searching = False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target or self._searching:
            return None
        self._searching = True  # the real finders locate the module
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        remove_hook(self)
        self._loader.exec_module(module)
        self.patch(module)


def patch_on_import(target: str, patch: Callable[[ModuleType], None]) -> _PatchOnImport | None:
    """Run `patch(module)` when `target` is first imported (or now, if it already was: then None is returned);
    the hook otherwise, for `remove_hook`."""
    if target in sys.modules:
        patch(sys.modules[target])
        return None
    hook = _PatchOnImport(target, patch)
    sys.meta_path.insert(0, hook)
    return hook


def remove_hook(hook: _PatchOnImport | None) -> None:
    """Disarm a hook that has not fired yet."""
    if hook in sys.meta_path:
        sys.meta_path.remove(hook)
