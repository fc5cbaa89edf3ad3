"""Patch a module of the vLLM server the moment it is first imported (before anyone imports from it).

The server's sitecustomize (`server_site/`) arms these hooks in every Python process of a vLLM server tree.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `target` through the other finders, runs it, then calls `patch(module)`."""

    def __init__(self, target: str, patch: Callable[[ModuleType], None]) -> None:
        self.target = target
        self.patch = patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        sys.meta_path.remove(self)  # one-shot: the real finders locate the module
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self.patch(module)


def patch_on_import(target: str, patch: Callable[[ModuleType], None]) -> None:
    """Run `patch(module)` when `target` is first imported (or now, if it already was); idempotent per target."""
    if target in sys.modules:
        patch(sys.modules[target])
    elif not any(isinstance(f, _PatchOnImport) and f.target == target for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(target, patch))
