"""Builds the static site of a run directory, re-rendering only episode files that changed."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from loop_agents.rollout.trajectory import load_trajectories
from loop_agents.view.episodes_page import group_file_name, render_episodes_page
from loop_agents.view.group_page import render_group_page
from loop_agents.view.index_page import render_index_page
from loop_agents.view.run_dir import EpisodeFile, RunFiles, find_run_files
from loop_agents.view.summary import episode_file_summary, group_trajectories
from loop_agents.view.tokens import TokenDecoder

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


def build_site(
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    tokenizer_path: str | None = None,
    force: bool = False,
) -> Path:
    """Writes the site (default `<run_dir>/viewer/`) and returns the path of its index.html.

    A page is rebuilt when its source file's size or mtime changed, the tokenizer changed, or `force`.
    """
    files = find_run_files(run_dir)
    out = Path(out_dir) if out_dir is not None else files.run_dir / "viewer"
    out.mkdir(parents=True, exist_ok=True)
    decoder = TokenDecoder.from_path(tokenizer_path) if tokenizer_path else None
    manifest = _read_manifest(out / MANIFEST)
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("tokenizer") != tokenizer_path:
        manifest = {"format": MANIFEST_FORMAT, "tokenizer": tokenizer_path, "files": {}}
    summaries: dict[str, dict[str, Any]] = {}
    for episode_file in files.rollouts + files.evals:
        stat = episode_file.path.stat()
        key = {"source": str(episode_file.path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        cached = manifest["files"].get(episode_file.page_name)
        page_exists = (out / episode_file.page_name / "index.html").exists()
        if not force and page_exists and cached and all(cached.get(k) == v for k, v in key.items()):
            summaries[episode_file.page_name] = cached["summary"]
            continue
        summary = _render_episode_file(episode_file, files, out, decoder)
        summaries[episode_file.page_name] = summary
        manifest["files"][episode_file.page_name] = {**key, "summary": summary}
        _write(out / MANIFEST, json.dumps(manifest))  # after each file: an interrupted build keeps its work
    index = out / "index.html"
    _write(index, render_index_page(files, summaries))
    return index


def _render_episode_file(
    episode_file: EpisodeFile, files: RunFiles, out: Path, decoder: TokenDecoder | None
) -> dict[str, Any]:
    trajectories = load_trajectories(episode_file.path)
    log.info("rendering %s (%d episodes)", episode_file.path, len(trajectories))
    groups = group_trajectories(trajectories)
    summary = episode_file_summary(trajectories, with_goal_completion=episode_file.split is not None)
    folder = out / episode_file.page_name
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("group_*.html"):
        stale.unlink()
    crumbs: list[tuple[str, str | None]] = [(f"run {files.run_dir.name}", "../index.html")]
    _write(
        folder / "index.html",
        render_episodes_page(
            episode_file.title,
            groups,
            summary,
            _metrics_row(files, episode_file),
            crumbs + [(episode_file.title, None)],
        ),
    )
    for index, (group_id, members) in enumerate(groups.items()):
        group_crumbs = crumbs + [(episode_file.title, "index.html"), (f"group {group_id}", None)]
        _write(folder / group_file_name(index), render_group_page(group_id, members, decoder, group_crumbs))
    return summary


def _metrics_row(files: RunFiles, episode_file: EpisodeFile) -> dict[str, Any]:
    """metrics.jsonl rows of this iteration merged; eval pages keep the eval/ keys, rollout pages the others."""
    merged: dict[str, Any] = {}
    for row in files.metrics:
        if row.get("iteration") == episode_file.iteration:
            merged.update(row)
    is_eval = episode_file.split is not None
    return {k: v for k, v in merged.items() if k != "iteration" and k.startswith("eval/") == is_eval}


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _write(path: Path, text: str) -> None:
    """Atomic write, so that a page served while the site rebuilds is never half written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
