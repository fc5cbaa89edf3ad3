"""The saved state's size, charged call by call in the API process and kept under a cap before anything is saved.

What AppWorld's `_save_state` writes (format "changes") is each app database's change tracker, one JSON line per
recorded statement (`orjson.dumps(record) + "\\n"`), plus a small `model_hashes.json`. The budget counts those bytes
as the calls add records: after each call only the new records are measured. A call that takes the state over the
cap is undone from what will be saved (its records dropped from the trackers, the model change counters restored),
so the episode is scored on the state before that write; the API process then takes no more calls.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson  # AppWorld's own serializer (its save writes records with it)


def _record_bytes(record: Any) -> int:
    try:
        return len(orjson.dumps(record)) + 1
    except TypeError:  # a type orjson cannot write would fail AppWorld's save as well: count it generously
        return len(repr(record).encode()) + 1


class StateBudget:
    def __init__(self, app_names: list[str], home_path: str, cap_bytes: int) -> None:
        from appworld.apps.model_lib import ModelHashHandler
        from appworld.common.utils import import_models_module

        self.hashes = ModelHashHandler.data[home_path]
        self.trackers = [import_models_module(app).SQLModel.db.tracker for app in dict.fromkeys(app_names)]
        self.cap_bytes = cap_bytes
        self.seen = [len(t.changes) for t in self.trackers]
        self.size = sum(_record_bytes(r) for t in self.trackers for r in t.changes)
        self._before: tuple[list[int], int, dict[str, Counter]] | None = None

    def mark(self) -> None:
        """Remembers the state before a call."""
        self._before = (list(self.seen), self.size, {app: Counter(c) for app, c in self.hashes.items()})

    def charge(self) -> bool:
        """Adds the records the call made; False (and the call undone from the saved state) if over the cap."""
        for i, tracker in enumerate(self.trackers):
            self.size += sum(_record_bytes(r) for r in tracker.changes[self.seen[i] :])
            self.seen[i] = len(tracker.changes)
        if self.size <= self.cap_bytes:
            return True
        seen, size, hashes = self._before if self._before else (self.seen, self.size, {})
        for tracker, keep in zip(self.trackers, seen, strict=True):
            del tracker.changes[keep:]
        self.seen, self.size = list(seen), size
        for app, counts in hashes.items():
            self.hashes[app] = counts
        return False
