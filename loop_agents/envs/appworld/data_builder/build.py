"""Builds a whole data root: base DBs, API docs, scenarios x 3 variants, split files.

Scenario ids are 7 hex digits derived from (seed, index) and task ids are `<scenario>_<variant>`
(1-3), AppWorld's format. Every random choice comes from `random.Random` seeded by
(seed, scenario index, variant), so a seed gives byte-identical JSON and the same DB rows.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from loop_agents.envs.appworld.data_builder.people import draw_people
from loop_agents.envs.appworld.data_builder.task_writer import write_task
from loop_agents.envs.appworld.data_builder.templates import ALL_TEMPLATES
from loop_agents.envs.appworld.data_builder.templates.base import Template
from loop_agents.envs.appworld.data_builder.templates.hard import HARD_TEMPLATES

VARIANTS_PER_SCENARIO = 3
# Scenario counts per split; test_challenge draws from held-out template families only. 160 train scenarios (20 per
# template): with 16, the tiny warm model learned each train scenario's literals by heart and wrote garbage in the
# second cell of every held-out one (dev TGC 0.00-0.03); with 64 it scored dev TGC 0.07-0.13 but still broke most
# cells on held-out names; with 160 its cells are coherent and RL raised dev TGC 0.03 -> 0.13 (issue 19).
CLASSIC_SPLIT_SIZES = {"train": 160, "dev": 10, "test_normal": 6, "test_challenge": 6}
SPLITS = tuple(CLASSIC_SPLIT_SIZES)
# Parts added after the classic ones (issue 39), planned after them so that every classic task keeps its id and
# bytes (the recorded `appworld_demo` runs stay reproducible): `<split>_held_out` scenarios are appended to
# `<split>.txt` with ids that sort after every hex id ("x" + 6 hex digits), so the evaluator's selection (the
# first `eval.max_tasks` sorted ids) is the split's first part and `eval.held_out_tasks` takes them
# (eval/held_out.py); `train_hard` / `dev_hard` are the hard tier (templates/hard.py), RL-only families.
EXTRA_PARTS = {
    "dev_held_out": ("dev", "normal", True),
    "train_hard": ("train_hard", "hard", False),
    "dev_hard": ("dev_hard", "hard", False),
    "dev_hard_held_out": ("dev_hard", "hard", True),
}  # part -> (split file, template family, held-out ids)
# hard: 7 families (templates/hard.py), 2 dev scenarios of each for selection and 2 held out, 24 train scenarios
EXTRA_SPLIT_SIZES = {"dev_held_out": 10, "train_hard": 168, "dev_hard": 14, "dev_hard_held_out": 14}
DEFAULT_SPLIT_SIZES = {**CLASSIC_SPLIT_SIZES, **EXTRA_SPLIT_SIZES}
PARTS = tuple(DEFAULT_SPLIT_SIZES)
HELD_OUT_PREFIX = "x"  # > every hex digit


@dataclass(frozen=True)
class BuildReport:
    """What was written, and how long it took."""

    root: Path
    num_scenarios: int
    num_tasks: int
    seconds: float
    tasks_per_split: dict[str, int]


def scenario_id(seed: int, index: int) -> str:
    """7 hex digits, like AppWorld's generator ids; never contains '_'."""
    return hashlib.sha256(f"loop_agents:{seed}:{index}".encode()).hexdigest()[:7]


def held_out_scenario_id(seed: int, index: int) -> str:
    """7 characters that sort after every `scenario_id`: "x" and 6 hex digits."""
    return HELD_OUT_PREFIX + scenario_id(seed, index)[:6]


def plan_scenarios(seed: int, split_sizes: dict[str, int]) -> list[tuple[str, str, Template]]:
    """(split, scenario id, template) for every scenario, cycling templates within each family; the classic
    splits first (their plan does not depend on the extra parts), then the extra parts (`EXTRA_PARTS`)."""
    normal = [t for t in ALL_TEMPLATES if not t.challenge]
    challenge = [t for t in ALL_TEMPLATES if t.challenge]
    rng = random.Random(f"plan:{seed}")
    plan, index = [], 0
    for split in SPLITS:
        family = challenge if split == "test_challenge" else normal
        order = list(family)
        rng.shuffle(order)
        for k in range(split_sizes.get(split, 0)):
            plan.append((split, scenario_id(seed, index), order[k % len(order)]))
            index += 1
    extra_rng = random.Random(f"plan-extra:{seed}")
    for part, (split, family_name, held_out) in EXTRA_PARTS.items():
        order = list(normal if family_name == "normal" else HARD_TEMPLATES)
        extra_rng.shuffle(order)
        make_id = held_out_scenario_id if held_out else scenario_id
        for k in range(split_sizes.get(part, 0)):
            plan.append((split, make_id(seed, index), order[k % len(order)]))
            index += 1
    ids = [sid for _, sid, _ in plan]
    if len(set(ids)) != len(ids):
        raise ValueError(f"scenario ids collide for seed {seed}; choose another seed")
    return plan


def build_data_root(root: Path, seed: int = 0, split_sizes: dict[str, int] | None = None) -> BuildReport:
    """Writes `root/data` from scratch (an existing `root/data` is replaced)."""
    import os

    os.environ["APPWORLD_ROOT"] = str(root)  # before appworld caches its paths
    from loop_agents.envs.appworld.data_builder.base import build_base_dbs, write_api_docs

    sizes = dict(DEFAULT_SPLIT_SIZES if split_sizes is None else split_sizes)
    unknown = set(sizes) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown splits {sorted(unknown)}; known: {list(PARTS)}")
    start = time.monotonic()
    data_dir = root / "data"
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    build_base_dbs(data_dir)
    write_api_docs(data_dir)

    split_task_ids: dict[str, list[str]] = {split: [] for split in SPLITS}
    plan = plan_scenarios(seed, sizes)
    for split, _, _ in plan:
        split_task_ids.setdefault(split, [])  # the extra splits get a file only when they have tasks
    for index, (split, scenario, template) in enumerate(plan):
        scenario_rng = random.Random(f"scenario:{seed}:{index}")
        people = draw_people(scenario_rng, 8)
        base_time = datetime(2023, 5, 1, 9, 0) + timedelta(days=scenario_rng.randint(0, 60))
        for variant in range(1, VARIANTS_PER_SCENARIO + 1):
            task_id = f"{scenario}_{variant}"
            rng = random.Random(f"task:{seed}:{index}:{variant}")
            write_task(
                data_dir,
                task_id,
                lambda world, v=variant, t=template: t.populate(world, v),
                rng=rng,
                supervisor=people[0],
                contacts=people[1:],
                now=base_time + timedelta(days=variant, hours=rng.randint(0, 8)),
                difficulty=template.difficulty,
                num_apps=len(template.apps),
            )
            split_task_ids[split].append(task_id)

    datasets = data_dir / "datasets"
    datasets.mkdir()
    for split, task_ids in split_task_ids.items():
        (datasets / f"{split}.txt").write_text("".join(f"{t}\n" for t in task_ids))
    manifest = {
        "builder": "loop_agents.envs.appworld.data_builder",
        "seed": seed,
        "split_sizes": sizes,
        "scenarios": [
            {
                "split": split,
                "scenario_id": sid,
                "template": t.name,
                "difficulty": t.difficulty,
                "tier": "hard" if t in HARD_TEMPLATES else "easy",
                "held_out": sid.startswith(HELD_OUT_PREFIX),
            }
            for split, sid, t in plan
        ],
    }
    (data_dir / "loop_agents_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return BuildReport(
        root=root,
        num_scenarios=len(plan),
        num_tasks=sum(len(v) for v in split_task_ids.values()),
        seconds=time.monotonic() - start,
        tasks_per_split={split: len(v) for split, v in split_task_ids.items()},
    )
