"""Viewer render time and page sizes on a LOOP-sized iteration (40 tasks x 6 rollouts, 20 turns each).

    .venv/bin/python -m benchmarks.viewer_render [--tokenizer TINY_MODEL_DIR] [--turns 20] [--keep DIR]

Trajectories are synthetic in content (random token ids, repeated code/observation text) but real
Trajectory objects written and read through the run-directory files the viewer consumes.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from loop_agents.rollout.trajectory import Trajectory, Turn, save_trajectories
from loop_agents.view import build_site

CODE = "```python\nprint(apis.api_docs.show_api_doc(app_name='spotify', api_name='login'))\n```\n"
OBSERVATION = "Output:\n" + "{'name': 'song', 'id': 12, 'artists': ['x', 'y']}\n" * 40


def synthetic_iteration(tasks: int, k: int, turns: int, vocab: int) -> list[Trajectory]:
    rng = random.Random(0)
    out = []
    for task in range(tasks):
        for sample in range(k):
            traj = Trajectory(
                task_id=f"scenario{task}_1", group_id=f"g{task}", sample_index=sample, iteration=1
            )
            traj.append_context([rng.randrange(vocab) for _ in range(1500)])
            for _ in range(turns):
                ids = [rng.randrange(vocab) for _ in range(150)]
                start, end = traj.append_generation(ids, [-rng.random() for _ in ids])
                traj.turns.append(Turn(start, end, action_text=CODE * 3, observation_text=OBSERVATION))
                traj.append_context([rng.randrange(vocab) for _ in range(400)])
            traj.reward = rng.choice([0.0, 0.5, 1.0])
            traj.advantage = 0.0
            traj.metadata["filtered"] = False
            out.append(traj)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--keep", default=None, help="write the run and site here instead of a temp dir")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        run = Path(tmp) / "run"
        trajectories = synthetic_iteration(40, 6, args.turns, vocab=2000)
        save_trajectories(run / "rollouts" / "iter_000001.jsonl", trajectories)
        tokens = sum(t.num_tokens for t in trajectories)
        source_mb = (run / "rollouts" / "iter_000001.jsonl").stat().st_size / 1e6
        start = time.perf_counter()
        index = build_site(run, Path(tmp) / "site", args.tokenizer)
        first = time.perf_counter() - start
        start = time.perf_counter()
        build_site(run, Path(tmp) / "site", args.tokenizer)
        again = time.perf_counter() - start
        site = index.parent
        iteration_kb = (site / "iter_000001" / "index.html").stat().st_size / 1e3
        groups = sorted((site / "iter_000001").glob("group_*.html"))
        group_mb = max(p.stat().st_size for p in groups) / 1e6
        print(
            f"{len(trajectories)} trajectories, {tokens / 1e6:.2f} M tokens, source {source_mb:.1f} MB; "
            f"tokenizer={'yes' if args.tokenizer else 'no'}: first build {first:.2f} s, unchanged rebuild "
            f"{again:.3f} s; iteration page {iteration_kb:.0f} kB, largest group page {group_mb:.2f} MB"
        )


if __name__ == "__main__":
    main()
