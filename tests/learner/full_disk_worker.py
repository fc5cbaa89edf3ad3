"""Subprocess of the full-disk tests: `python -m tests.learner.full_disk_worker MODEL RUN_DIR OUT_JSON`.

Saves checkpoint-1, then lowers RLIMIT_FSIZE below the size of checkpoint-1's largest file (the kernel
then fails that write with EFBIG, for root too, as a full disk fails it with ENOSPC) and saves
checkpoint-2. With the limit lifted again, a fresh learner resumes from checkpoint-1. Under torchrun
(2 gloo ranks) only rank 0, the one that writes the big files, gets the limit; each rank writes
OUT_JSON with its rank inserted before the suffix.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from loop_agents.learner.checkpoint import CheckpointError
from tests.learner.batch import learner_config, loop_algorithm, make_batch
from tests.learner.leave import leave_together


def _step(learner: Learner, seed: int) -> None:
    batch = make_batch(seed=seed)
    compute_advantages(batch, loop_algorithm())
    learner.train_iteration(batch)


def main() -> None:
    model_dir, run_dir, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    rank = 0
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        out = out.with_name(f"{out.stem}.rank{rank}{out.suffix}")
    learner = Learner(learner_config(model_dir, epochs=1), loop_algorithm())
    _step(learner, 1)
    learner.save_checkpoint(run_dir / "checkpoint-1", {"iteration": 1})
    saved = learner.trainable_state()
    largest = max(
        (p for p in (run_dir / "checkpoint-1").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size
    )
    _step(learner, 2)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if rank == 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (largest.stat().st_size - 1, hard))
    try:
        learner.save_checkpoint(run_dir / "checkpoint-2", {"iteration": 2})
        error = None
    except CheckpointError as err:
        error = str(err)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    fresh = Learner(learner_config(model_dir, epochs=1), loop_algorithm())
    extra = fresh.load_checkpoint(run_dir / "checkpoint-1")
    same = all(torch.equal(fresh.trainable_state()[k], v) for k, v in saved.items())
    out.write_text(json.dumps({"error": error, "largest": largest.name, "extra": extra, "same": same}))
    leave_together()


if __name__ == "__main__":
    main()
