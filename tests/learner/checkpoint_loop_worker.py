"""Subprocess of the kill-mid-checkpoint test: `python -m tests.learner.checkpoint_loop_worker MODEL RUN_DIR`.

Resumes from the newest complete checkpoint of RUN_DIR (if any), then saves checkpoint-N, N+1, ... as fast
as it can (keeping 2), printing N once each is committed, until it is killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loop_agents.learner import Learner, latest_complete_checkpoint
from tests.learner.batch import learner_config, loop_algorithm


def main() -> None:
    model_dir, run_dir = sys.argv[1], Path(sys.argv[2])
    learner = Learner(learner_config(model_dir, epochs=1, keep_checkpoints=2), loop_algorithm())
    latest = latest_complete_checkpoint(run_dir)
    index = learner.load_checkpoint(latest)["index"] + 1 if latest is not None else 1
    while True:
        learner.save_checkpoint(run_dir / f"checkpoint-{index}", {"index": index})
        print(index, flush=True)
        index += 1


if __name__ == "__main__":
    main()
