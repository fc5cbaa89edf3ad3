"""The process id of each actor of a run, kept in `logs/actors.json` (diagnostics; the fault tests kill by it)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class ActorPids:
    """role -> pid of the actor now playing it, written to `<run_dir>/logs/actors.json` on every change."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "logs" / "actors.json"
        self._pids: dict[str, int] = {}
        self._pending: dict[str, Any] = {}  # role -> ObjectRef of its pid (actor still starting)

    def note(self, role: str, actor, wait: bool = True) -> None:
        """Record the actor's pid. `wait=False` records it once the actor is up (`note_started`): a
        replacement evaluator may take minutes to construct on a busy machine, and training must not wait."""
        import ray

        ref = actor.__ray_call__.remote(lambda _self: os.getpid())
        if not wait:
            self._pending[role] = ref
            return
        self._pending.pop(role, None)
        self._pids[role] = ray.get(ref)
        self._write()

    def note_started(self) -> None:
        """Record the pids of the actors noted with `wait=False` that have started since."""
        import ray

        for role, ref in list(self._pending.items()):
            if ray.wait([ref], timeout=0)[0]:
                del self._pending[role]
                try:
                    self._pids[role] = ray.get(ref)
                except ray.exceptions.RayActorError:
                    continue  # died before it started: its replacement notes its own pid
                self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_suffix(".tmp")
        temp.write_text(json.dumps(self._pids))
        temp.replace(self.path)
