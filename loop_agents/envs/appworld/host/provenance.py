"""Proof that an episode's outputs were written by trusted processes: an HMAC-SHA256 over every output file.

The host signs an episode's output folder after the API process saved the end state and before anyone scores
it; `score_experiment` (what `parse_and_log` runs) scores only folders whose signature verifies. The key lives
in `<root>/experiments/.provenance_key` (mode 0600, made once); the host reads it after the zygote was forked,
and the policy process's view holds neither the file nor any image that read it.

    mac = HMAC-SHA256(key, "task_id\\0" + for each file, sorted: "path\\0sha256(content)\\n")
    (every file of the folder but the signature and the evaluator's `evaluation/` reports; bound to the task, not
    to the experiment's name, so a renamed or copied experiment still verifies against its root's key)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

KEY_NAME = ".provenance_key"
SIGNATURE_NAME = "provenance.json"
SCORER_FOLDER = "evaluation"  # the evaluator's own reports, written after signing: scores, not inputs


def key_path(root: Path) -> Path:
    return root / "experiments" / KEY_NAME


def ensure_key(root: Path) -> bytes:
    """The root's key, made (32 random bytes, 0600) if it does not exist yet."""
    path = key_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as file:
        file.write(os.urandom(32))
    return path.read_bytes()


def _digest(key: bytes, out_dir: Path, task_id: str) -> tuple[str, int]:
    mac = hmac.new(key, f"{task_id}\0".encode(), hashlib.sha256)
    files = sorted(
        p for p in out_dir.rglob("*")
        if p.is_file() and p.name != SIGNATURE_NAME and p.relative_to(out_dir).parts[0] != SCORER_FOLDER
    )  # fmt: skip
    for path in files:
        relative = path.relative_to(out_dir).as_posix()
        mac.update(f"{relative}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return mac.hexdigest(), len(files)


def sign(key: bytes, out_dir: Path, task_id: str, experiment: str) -> None:
    mac, count = _digest(key, out_dir, task_id)
    payload = {"task_id": task_id, "experiment": experiment, "files": count, "hmac_sha256": mac}
    (out_dir / SIGNATURE_NAME).write_text(json.dumps(payload))


def problem(key: bytes, out_dir: Path, task_id: str) -> str:
    """'' if the folder's signature verifies, else a reason naming the file."""
    signature = out_dir / SIGNATURE_NAME
    if not signature.is_file():
        return f"{signature} is missing: these outputs were not written by a loop_agents episode host"
    try:
        recorded = json.loads(signature.read_text())["hmac_sha256"]
    except (ValueError, KeyError, TypeError):
        return f"{signature} is not a signature"
    mac, _ = _digest(key, out_dir, task_id)
    if not hmac.compare_digest(str(recorded), mac):
        return f"{signature} does not match the files beside it: they were changed after the episode or copied in"
    return ""


def unverified(root: Path, outputs: Path, task_ids: list[str]) -> dict[str, str]:
    """task id -> why its folder under `outputs/tasks/` does not verify against `root`'s key (none: every one)."""
    path = key_path(root)
    if not path.is_file():
        return {
            t: f"{path} is missing: no episode host ever signed outputs under this root" for t in task_ids
        }
    key = path.read_bytes()
    reasons = {t: problem(key, outputs / "tasks" / t, t) for t in task_ids}
    return {t: why for t, why in reasons.items() if why}
