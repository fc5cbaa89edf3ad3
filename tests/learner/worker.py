"""torchrun worker for the learner tests: `python -m tests.learner.worker <mode> <model_dir> <out> [ckpt]`.

Modes: `oracle` (one LOOP iteration, save trainable state + step metrics), `train` (N iterations
with optional resume/save, for the resume-exactness test). `LOOP_TEST_DTYPE` sets the base dtype; `LOOP_TEST_SHARED=1` trains on make_shared_batch with
learner.share_prefix=on (and a micro-token budget that fits several trajectories).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from tests.learner.batch import learner_config, loop_algorithm, make_batch, make_shared_batch
from tests.learner.leave import leave_together

SHARED = os.environ.get("LOOP_TEST_SHARED") == "1"


def run_iterations(learner: Learner, start: int, stop: int) -> list[dict]:
    metrics = []
    algorithm = loop_algorithm()
    for it in range(start, stop):
        batch = make_shared_batch(seed=it) if SHARED else make_batch(seed=it)
        compute_advantages(batch, algorithm)
        metrics.append(learner.train_iteration(batch))
    return metrics


def main() -> None:
    mode, model_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo")
    dtype = os.environ.get("LOOP_TEST_DTYPE", "float32")
    overrides = dict(share_prefix="on", micro_token_budget=200) if SHARED else {}
    learner = Learner(learner_config(model_dir, dtype=dtype, **overrides), loop_algorithm())
    if mode == "oracle":
        run_iterations(learner, 0, 1)
        result = {"state": learner.trainable_state(), "steps": learner.step_history}
    else:  # train: argv = train model out checkpoint_dir start stop action(save|resume|none)
        ckpt_dir, start, stop, action = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
        if action == "resume":
            extra = learner.load_checkpoint(ckpt_dir)
            assert extra["next_batch"] == start, extra
        metrics = run_iterations(learner, start, stop)
        if action == "save":
            learner.save_checkpoint(ckpt_dir, {"next_batch": stop})
        result = {"state": learner.trainable_state(), "steps": learner.step_history, "metrics": metrics}
    if not dist.is_initialized() or dist.get_rank() == 0:
        torch.save(result, out)
    leave_together()


if __name__ == "__main__":
    main()
