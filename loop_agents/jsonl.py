"""JSON-lines files a run reads back (metrics.jsonl): tolerant of the one fault a crash leaves, strict on others.

A process killed while appending a row leaves a partial last line. `read_rows` drops it with one printed
note and goes on; a bad line anywhere else is not a crash's trace, so it raises JsonlError naming file and
line. `rewrite_rows` replaces a file through a temporary file and a rename, so a kill during the rewrite
leaves the old file or the new one, never a shorter mix.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class JsonlError(ValueError):
    """A line before the last of a JSON-lines file is not JSON: the file is damaged, not torn."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def read_rows(path: str | Path, note: Callable[[str], None] = _stderr) -> list[dict[str, Any]]:
    """The rows of `path` ([] if it does not exist); a torn last line is dropped and `note` gets one line."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    rows: list[dict[str, Any]] = []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            if index == last:
                note(
                    f"[resume] {path}: dropped a partial last row (line {index + 1}, {len(line)} bytes, "
                    "left by a crash mid-write); the run rewrites it"
                )
                break
            raise JsonlError(
                f"{path}:{index + 1} is not a JSON line ({err.msg}); repair or remove that line"
            ) from None
    return rows


def rewrite_rows(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Replace `path` by `rows`, one JSON object a line, atomically (a temp file in the same folder, renamed)."""
    path = Path(path)
    temp = path.with_name(f".{path.name}.tmp")
    with temp.open("w") as f:
        f.write("".join(json.dumps(row) + "\n" for row in rows))
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
