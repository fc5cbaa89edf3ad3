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


def run(
    tasks: int = 40, k: int = 6, turns: int = 20, tokenizer: str | None = None, keep: str | None = None
) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        tmp = keep or scratch
        run_dir = Path(tmp) / "run"
        trajectories = synthetic_iteration(tasks, k, turns, vocab=2000)
        save_trajectories(run_dir / "rollouts" / "iter_000001.jsonl", trajectories)
        tokens = sum(t.num_tokens for t in trajectories)
        source_mb = (run_dir / "rollouts" / "iter_000001.jsonl").stat().st_size / 1e6
        start = time.perf_counter()
        index = build_site(run_dir, Path(tmp) / "site", tokenizer)
        first = time.perf_counter() - start
        start = time.perf_counter()
        build_site(run_dir, Path(tmp) / "site", tokenizer)
        again = time.perf_counter() - start
        site = index.parent
        iteration_kb = (site / "iter_000001" / "index.html").stat().st_size / 1e3
        groups = sorted((site / "iter_000001").glob("group_*.html"))
        group_mb = max(p.stat().st_size for p in groups) / 1e6
    return {
        "trajectories": len(trajectories),
        "tokens": tokens,
        "source_mb": round(source_mb, 2),
        "tokenizer": bool(tokenizer),
        "first_build_s": round(first, 3),
        "unchanged_rebuild_s": round(again, 4),
        "iteration_page_kb": round(iteration_kb, 1),
        "largest_group_page_mb": round(group_mb, 3),
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run viewer_render` (no goal in the issue: reported)."""
    r = run(tasks=8 if quick else 40)
    return {
        **r,
        "ratio": round(r["unchanged_rebuild_s"] / r["first_build_s"], 6),
        "ratio_definition": "unchanged rebuild time / first build time of the same run directory",
        "summary": f"{r['trajectories']} trajectories, {r['tokens'] / 1e6:.2f} M tokens: first build "
        f"{r['first_build_s']:.2f} s, unchanged rebuild {r['unchanged_rebuild_s']:.3f} s; iteration page "
        f"{r['iteration_page_kb']:.0f} kB, largest group page {r['largest_group_page_mb']:.2f} MB",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--keep", default=None, help="write the run and site here instead of a temp dir")
    args = parser.parse_args()
    r = run(turns=args.turns, tokenizer=args.tokenizer, keep=args.keep)
    print(
        f"{r['trajectories']} trajectories, {r['tokens'] / 1e6:.2f} M tokens, source {r['source_mb']:.1f} MB; "
        f"tokenizer={'yes' if r['tokenizer'] else 'no'}: first build {r['first_build_s']:.2f} s, unchanged "
        f"rebuild {r['unchanged_rebuild_s']:.3f} s; iteration page {r['iteration_page_kb']:.0f} kB, largest "
        f"group page {r['largest_group_page_mb']:.2f} MB"
    )


if __name__ == "__main__":
    main()
