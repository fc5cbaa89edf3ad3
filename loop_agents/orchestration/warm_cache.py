"""A cache of full-weight warm models shared by runs (`learner.sft_cache_dir`).

A warm model is a pure function of the base model's files, the demonstrations' tokens (and their loss weights) and
the SFT settings, so it is stored under the SHA-256 of exactly those and copied into a run's `warm_model/` on a
hit. This is what lets `experiment=debug` start from a warm start that took minutes to train once, in seconds.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loop_agents.rollout.trajectory import Trajectory


def warm_model_key(
    base_dir: str | Path,
    demonstrations: list[Trajectory],
    settings: dict[str, Any],
    token_weights: list[list[float]] | None = None,
) -> str:
    """SHA-256 (hex, 16 digits) of the base model's files, the demonstrations' ids, masks and per-token loss weights
    (when the family weighs tokens), and `settings`."""
    digest = hashlib.sha256()
    for path in sorted(Path(base_dir).iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for demo in demonstrations:
        digest.update(json.dumps([list(demo.token_ids), list(demo.loss_mask)]).encode())
    if token_weights is not None:  # what the model is trained on: another weighing is another model
        digest.update(json.dumps(token_weights).encode())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def through_cache(
    cache_dir: str | Path, key: str, out_dir: Path, build: Callable[[], Path]
) -> tuple[Path, bool]:
    """`out_dir` filled from `cache_dir/key` if cached, else built by `build()` and then cached (atomically).

    Returns (out_dir, whether it came from the cache)."""
    cached = Path(cache_dir) / key
    if not (out_dir / "warm_start.json").exists() and (cached / "warm_start.json").exists():
        temp = out_dir.parent / f".{out_dir.name}.from_cache"
        shutil.rmtree(temp, ignore_errors=True)
        shutil.copytree(cached, temp)
        temp.rename(out_dir)
        print(f"[warm start] reused the cached warm model {cached}", flush=True)
        return out_dir, True
    built = build()
    if not (cached / "warm_start.json").exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        temp = cached.parent / f".{key}.tmp"
        shutil.rmtree(temp, ignore_errors=True)
        shutil.copytree(built, temp)
        try:
            temp.rename(cached)
        except OSError:  # another run cached the same key meanwhile
            shutil.rmtree(temp, ignore_errors=True)
            return built, False
        print(f"[warm start] cached the warm model in {cached}", flush=True)
    return built, False
