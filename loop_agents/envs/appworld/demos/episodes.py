"""The scripted episodes of a split, played once through the real engine and cached beside the data.

Plan: for every task of the split, its clean script and one variant per noise kind. The plan is played by
`play.py` in the AppWorld venv (subprocesses, one per core up to 4, each task in one of them: the trainer
never imports appworld; 1,920 episodes took 605 s in one process on a busy 2-core machine) and the result is cached
as `<root>/loop_agents_demos/<split>-<hash of the plan>.jsonl`, so a changed script or data root is
replayed and an unchanged one is not. Only the self-made data can be scripted: its manifest names each
scenario's family.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from loop_agents.envs.appworld.apps import APP_DESCRIPTIONS
from loop_agents.envs.appworld.config import REPO_ROOT, AppWorldConfig
from loop_agents.envs.appworld.demos.noise import NOISE_KINDS, noisy_cells
from loop_agents.envs.appworld.demos.scripted import SCRIPTS, clean_cells, script_for, written_value
from loop_agents.envs.appworld.splits import scenario_of, split_task_ids

MANIFEST = "loop_agents_manifest.json"


def scenario_families(root: Path) -> dict[str, str]:
    """scenario id -> template name, from the self-made data's manifest."""
    path = root / "data" / MANIFEST
    if not path.exists():
        raise ValueError(
            f"AppWorld demonstrations need the self-made data (scripts/build_appworld_data.py): no {path}"
        )
    return {s["scenario_id"]: s["template"] for s in json.loads(path.read_text())["scenarios"]}


def _task_file(root: Path, task_id: str, name: str) -> Any:
    return json.loads((root / "data" / "tasks" / task_id / name).read_text())


def plan_episodes(root: Path, split: str, seed: int, read: bool = False) -> list[dict[str, Any]]:
    """Clean and noisy cells of every scripted task of `split` (tasks of unscripted families are left out);
    `read`: the cells read the task's values from its instruction (`Script.cells`)."""
    families = scenario_families(root)
    plan = []
    for task_id in split_task_ids(root, split):
        template = families.get(scenario_of(task_id))
        if template not in SCRIPTS:
            continue
        public = _task_file(root, task_id, "ground_truth/public_data.json")
        plan.append({"task_id": task_id, "kind": "clean", "cells": clean_cells(template, public, read)})
        for kind in NOISE_KINDS:
            cells = noisy_cells(template, public, kind, seed=f"{seed}:{task_id}", read=read)
            if cells is not None:
                plan.append({"task_id": task_id, "kind": kind, "cells": cells})
    if not plan:
        raise ValueError(f"no task of AppWorld split {split!r} has a scripted solution")
    return plan


def played_episodes(config: AppWorldConfig, split: str, seed: int) -> list[dict[str, Any]]:
    """The plan's episodes with the engine's outputs and test results (played once, then read from cache)."""
    root = config.root_path
    plan = plan_episodes(root, split, seed, read=config.demo_values == "read")
    digest = hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:12]
    cache = root / "loop_agents_demos" / f"{split}-{digest}.jsonl"
    # The plan (task ids and cells) fixes the episodes: another split name with the same plan (`train_and_train_hard`,
    # whose hard tasks have no script, plays what `train` played) reads that split's episodes.
    same_plan = sorted(cache.parent.glob(f"*-{digest}.jsonl")) if not cache.exists() else []
    if same_plan:
        cache = same_plan[0]
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with tempfile.TemporaryDirectory(dir=cache.parent) as tmp:
            played = Path(tmp) / "played.jsonl"
            played.write_text("".join(json.dumps(e) + "\n" for e in _play(config, plan, Path(tmp))))
            played.rename(cache)
        print(f"[warm start] played in {time.monotonic() - began:.0f} s -> {cache}", flush=True)
    return [json.loads(line) for line in cache.read_text().splitlines() if line.strip()]


def _play(config: AppWorldConfig, plan: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    """Play the plan in `play_workers()` AppWorld-venv processes at once, all episodes of a task in one of
    them (they write the same output folder, one after the other); the result keeps the plan's order."""
    tasks = sorted({episode["task_id"] for episode in plan})
    workers = min(play_workers(), len(tasks))
    worker_of = {task_id: index % workers for index, task_id in enumerate(tasks)}
    print(f"[warm start] playing {len(plan)} scripted AppWorld episodes through the engine "
          f"({workers} process{'es' if workers > 1 else ''})", flush=True)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    processes = []
    for worker in range(workers):
        plan_path, out_path = tmp / f"plan_{worker}.json", tmp / f"played_{worker}.jsonl"
        plan_path.write_text(json.dumps([e for e in plan if worker_of[e["task_id"]] == worker]))
        command = [str(config.python_path), "-m", "loop_agents.envs.appworld.demos.play", str(config.root_path),
                   str(plan_path), str(out_path)]  # fmt: skip
        processes.append(subprocess.Popen(command, env=env, cwd=tmp))
    try:
        for process in processes:
            if process.wait(timeout=3600) != 0:
                raise RuntimeError(
                    f"playing the scripted AppWorld episodes failed (exit {process.returncode})"
                )
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    played = {}
    for worker in range(workers):
        for line in (tmp / f"played_{worker}.jsonl").read_text().splitlines():
            episode = json.loads(line)
            played[(episode["task_id"], episode["kind"])] = episode
    return [played[(episode["task_id"], episode["kind"])] for episode in plan]


def play_workers() -> int:
    """Processes that play demonstrations at once: the machine's cores, at most 4 (each opens one world)."""
    return max(1, min(4, os.cpu_count() or 1))


def task_info(root: Path, task_id: str) -> dict[str, Any]:
    """What the environment's reset gives the agent (instruction, supervisor, datetime), from specs.json."""
    specs = _task_file(root, task_id, "specs.json")
    return {"task_id": task_id, "instruction": specs["instruction"], "supervisor": dict(specs["supervisor"]),
            "datetime": specs["datetime"], "app_descriptions": dict(APP_DESCRIPTIONS)}  # fmt: skip


def task_values(root: Path, task_id: str, family: str | None = None) -> dict[str, Any]:
    """The task's own values (its family's slots: a tag, a name, a date, an amount ...) from its public data,
    in the slots' order; `family` spares a read of the manifest where the caller knows it."""
    script = script_for(family or scenario_families(root)[scenario_of(task_id)])
    public = _task_file(root, task_id, "ground_truth/public_data.json")
    return {slot: public[slot] for slot in script.slots}


def task_literals(root: Path, task_id: str) -> list[str]:
    """How the task's own values are spelled in its scripted cells (`written_value`), e.g. `'Tariq Fontaine'`,
    `'May 22, 2023'`, `27.75`."""
    return [written_value(slot, value) for slot, value in task_values(root, task_id).items()]
