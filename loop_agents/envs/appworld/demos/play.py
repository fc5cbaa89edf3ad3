"""Plays scripted episodes through the real AppWorld engine and records what it says (AppWorld venv only).

    python -m loop_agents.envs.appworld.demos.play <root> <episodes.json> <out.jsonl>

`episodes.json` is a list of `{"task_id", "kind", "cells"}`; for each, one world is opened (one at a time,
on the main thread: the only safe way in-process, docs/appworld-offline.md §5), the cells run in order until
the task is completed, and the engine's own evaluator scores the result. Each output line adds
`outputs` (one per executed cell), `passes`, `num_tests` and `success`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def play(root: Path, episodes: list[dict], out_path: Path, experiment_name: str = "loop_agents_demos") -> int:
    """Plays every episode and writes one JSON line each; returns how many succeeded."""
    os.environ["APPWORLD_ROOT"] = str(root)
    from appworld import AppWorld

    successes = 0
    with out_path.open("w") as out:
        for episode in episodes:
            outputs = []
            with AppWorld(
                task_id=episode["task_id"], experiment_name=experiment_name, timeout_seconds=30
            ) as world:
                for cell in episode["cells"]:
                    outputs.append(world.execute(cell))
                    if world.task_completed():
                        break
                result = world.evaluate(suppress_errors=True).to_dict()
            record = {**episode, "outputs": outputs, "passes": len(result["passes"]),
                      "num_tests": result["num_tests"], "success": bool(result["success"])}  # fmt: skip
            successes += record["success"]
            out.write(json.dumps(record) + "\n")
    return successes


def main() -> None:
    root, episodes_path, out_path = (Path(arg).resolve() for arg in sys.argv[1:4])
    episodes = json.loads(episodes_path.read_text())
    successes = play(root, episodes, out_path)
    print(f"[play demos] {len(episodes)} episodes, {successes} passed every test -> {out_path}", flush=True)
    # Each world leaves an IPython shell whose atexit hook runs gc.collect() over the whole heap: with 192
    # worlds the exit took minutes longer than the playing (measured: 1 min of play, then > 4 min of exit).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
