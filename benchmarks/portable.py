"""Paths as a results file records them: relative to the clone that made them, never this machine's layout.

A results file is read on other machines and in other clones, where `/work/main/runs/...` means nothing (and it
leaks the recording machine's layout). A path inside the repository is stored relative to its root; a path in
another clone or a temporary copy keeps only what follows its `runs/` folder (`runs/demo_seeds/s0_t2`), which is
the part the run's own command named; anything else keeps its last two parts.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent


def portable_path(path: str | Path, root: Path = ROOT) -> str:
    """`path` as a results file stores it (see the module docstring); relative input is returned as it is."""
    given = PurePosixPath(str(path))
    if not given.is_absolute():
        return str(given)
    resolved = PurePosixPath(Path(path).resolve().as_posix())
    if resolved.is_relative_to(root.as_posix()):
        return str(resolved.relative_to(root.as_posix()))
    parts = resolved.parts
    if "runs" in parts:
        return str(PurePosixPath(*parts[len(parts) - 1 - parts[::-1].index("runs") :]))
    return str(PurePosixPath(*parts[-2:]))


def from_portable(path: str, root: Path = ROOT) -> Path:
    """Where a stored path is in this clone (relative to its root; an absolute one, from older files, as it is)."""
    return Path(path) if Path(path).is_absolute() else root / path
