"""Where a rerun picks up: the newest checkpoint that verifies, and the metrics log made to match it.

`verified_checkpoint` walks the `checkpoint-N` directories newest first. One that is damaged is renamed
`checkpoint-N.corrupt` (kept, never deleted), named in one line, and the one before it is tried. Damaged means any
of: no `done` marker, no `manifest.json`, files that do not match the manifest (learner/manifest.py). Our writes
never leave the first two under a final name (a checkpoint is written in a temp dir, marked done, then renamed),
so either means the directory was changed after it was written: it is not resumed from unverified, nor skipped and
later overwritten by the rerun's save of the same name. If no earlier checkpoint verifies, the damaged one is left
in place and CheckpointError says so: starting over would rewrite the run's logs with less.

`restore_metrics` makes metrics.jsonl hold every row up to the resumed iteration exactly once: rows after it
go (the rerun writes them again), a torn last row goes (jsonl.py), and the resumed checkpoint's own row comes
back if the process died between the checkpoint and the log append.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loop_agents.errors import CheckpointError
from loop_agents.learner.checkpoint import CHECKPOINT_PATTERN, is_complete
from loop_agents.learner.manifest import MANIFEST, verify_directory


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _checkpoints_newest_first(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found = [
        (int(m.group(1)), child)
        for child in folder.iterdir()
        if (m := CHECKPOINT_PATTERN.match(child.name)) and child.is_dir()
    ]
    return [path for _, path in sorted(found, reverse=True)]


def damage(checkpoint: Path) -> str | None:
    """Why `checkpoint` cannot be resumed from, in a few words, or None when it verifies."""
    if not is_complete(checkpoint):
        return "no done marker: its write never finished here"
    if not (checkpoint / MANIFEST).is_file():
        return f"{checkpoint / MANIFEST} is missing: its files cannot be verified"
    return verify_directory(checkpoint)


def set_aside(checkpoint: Path) -> Path:
    """Rename `checkpoint` to `<name>.corrupt` (`.corrupt.2`, ... if taken); returns the new path."""
    target, n = checkpoint.with_name(f"{checkpoint.name}.corrupt"), 1
    while target.exists():
        n += 1
        target = checkpoint.with_name(f"{checkpoint.name}.corrupt.{n}")
    checkpoint.rename(target)
    return target


def verified_checkpoint(folder: str | Path, note: Callable[[str], None] = _stderr) -> Path | None:
    """The newest checkpoint under `folder` that verifies (None if there is no checkpoint at all)."""
    candidates = _checkpoints_newest_first(Path(folder))
    for index, checkpoint in enumerate(candidates):
        problem = damage(checkpoint)
        if problem is None:
            return checkpoint
        if index + 1 == len(candidates):
            raise CheckpointError(
                f"checkpoint {checkpoint} is damaged ({problem}) and no earlier complete checkpoint exists; "
                f"move {checkpoint} away to start the run over"
            )
        aside = set_aside(checkpoint)
        note(
            f"[resume] {checkpoint.name} is damaged ({problem}); moved aside to {aside.name}, "
            f"resuming from {candidates[index + 1].name}"
        )
    return None


def restore_metrics(log, start_iteration: int, checkpoint_row: dict[str, Any] | None) -> None:
    """Make `log` (a RunLog) hold each row up to `start_iteration` once, the checkpoint's row included."""
    log.truncate_after(start_iteration)
    if checkpoint_row and not log.has_training_row(start_iteration):
        log.log(checkpoint_row, start_iteration)  # killed after the checkpoint, before the log


def agreed_checkpoint(dist, folder: str | Path) -> Path | None:
    """`verified_checkpoint` run on rank 0 (it alone moves a damaged one aside), its answer on every rank; a
    CheckpointError is raised on every rank, so none waits for a rank that gave up."""

    def choose() -> tuple[Path | None, str | None]:
        try:
            return verified_checkpoint(folder), None
        except CheckpointError as err:
            return None, str(err)

    checkpoint, error = dist.on_driver_first(choose)
    if error is not None:
        raise CheckpointError(error)
    return checkpoint
