"""What a checkpoint or adapter directory held when it was written, and whether it still holds it.

`write_manifest` records the size and sha256 of every file of a directory in `manifest.json` (written last,
through a temporary file and a rename, just before the `done` marker). `verify_directory` reads it back and
names the first file that is missing or differs, so a resumed run can skip a checkpoint that a disk fault,
a copy cut short or a hand edit damaged, and an evaluation can refuse an adapter before it starts a server.
A directory written before manifests existed is checked by structure: its JSON files parse and each
`.safetensors` file is as long as its header says.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

MANIFEST = "manifest.json"
_NOT_RECORDED = {MANIFEST, "done"}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(directory: Path) -> list[Path]:
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file() and p.relative_to(directory).as_posix() not in _NOT_RECORDED
    )


def write_manifest(directory: str | Path) -> Path:
    """Record `{relative path: {size, sha256}}` of every file under `directory` in its manifest.json."""
    directory = Path(directory)
    files = {
        p.relative_to(directory).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in _files(directory)
    }
    temp = directory / f".{MANIFEST}.tmp"
    with temp.open("w") as f:
        json.dump({"version": 1, "files": files}, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, directory / MANIFEST)
    return directory / MANIFEST


def _recorded(directory: Path) -> tuple[dict[str, dict] | None, str]:
    """The manifest's entries for `directory` (its own, or the `adapter/` entries of its parent checkpoint's)."""
    own = directory / MANIFEST
    if own.is_file():
        return json.loads(own.read_text())["files"], ""
    parent = directory.parent / MANIFEST
    if parent.is_file():
        prefix = directory.name + "/"
        entries = json.loads(parent.read_text())["files"]
        inside = {name[len(prefix) :]: e for name, e in entries.items() if name.startswith(prefix)}
        if inside:
            return inside, prefix
    return None, ""


def verify_directory(directory: str | Path) -> str | None:
    """None if every recorded file of `directory` (a checkpoint or an adapter dir) has its recorded size and
    sha256; else one line naming the bad file and what is wrong with it."""
    directory = Path(directory)
    if not directory.is_dir():
        return f"{directory} is not a directory"
    try:
        recorded, _ = _recorded(directory)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"{directory / MANIFEST} cannot be read ({type(err).__name__})"
    if recorded is None:
        return _verify_structure(directory)
    for name, entry in sorted(recorded.items()):
        path = directory / name
        if not path.is_file():
            return f"{path} is missing"
        size = path.stat().st_size
        if size != entry["size"]:
            return f"{path} has {size} bytes, {entry['size']} when written"
        if _sha256(path) != entry["sha256"]:
            return f"{path} differs from what was written (sha256 mismatch)"
    return None


def _verify_structure(directory: Path) -> str | None:
    """Checks for a directory without a manifest: JSON files parse, safetensors files are whole."""
    for path in _files(directory):
        if path.suffix == ".json":
            try:
                json.loads(path.read_text())
            except (OSError, ValueError) as err:
                return f"{path} is not valid JSON ({type(err).__name__})"
        elif path.suffix == ".safetensors":
            problem = safetensors_problem(path)
            if problem is not None:
                return f"{path} {problem}"
    return None


def safetensors_problem(path: Path) -> str | None:
    """None if `path` is a whole safetensors file (header parses, data as long as the header says), else why."""
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if 8 + header_len > size:
                return f"is truncated ({size} bytes, its header alone needs {8 + header_len})"
            header = json.loads(f.read(header_len))
    except (struct.error, ValueError, UnicodeDecodeError):
        return f"is not a safetensors file ({size} bytes, unreadable header)"
    end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + end != size:
        return f"is truncated or padded ({size} bytes, its header says {8 + header_len + end})"
    return None


def verify_adapter(directory: str | Path) -> None:
    """Raise ValueError (one line naming the bad file) unless `directory` is a whole PEFT adapter directory:
    adapter_config.json and adapter_model.safetensors present and matching what was written."""
    directory = Path(directory)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        if not (directory / name).is_file():
            raise ValueError(f"adapter {directory} is incomplete: {directory / name} is missing")
    problem = verify_directory(directory)
    if problem is None:
        problem = _verify_structure(directory)  # a manifest records what was written, not that it was whole
    if problem is not None:
        raise ValueError(f"adapter {directory} is damaged: {problem}")
