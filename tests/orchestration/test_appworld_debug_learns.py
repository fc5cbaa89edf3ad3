"""`experiment=debug` (its 3 iterations) on AppWorld exercises the learner: the real engine, the self-made data, the compact prompt
and the warm start on scripted demonstrations give rollouts of one task different rewards, so LOOP keeps some
and the learner takes optimizer steps (before issue 19 every group had equal rewards and it never stepped).

The warm model comes from `artifacts/warm_models` (shared with appworld_demo); the first run on a machine
trains it."""

from __future__ import annotations

import json

from loop_agents.config.load import compose
from tests.orchestration.appworld_learning import LEARNING_TEST_MARKS, train_and_read_metrics

pytestmark = LEARNING_TEST_MARKS


def test_debug_takes_learner_steps_on_appworld(tmp_path) -> None:
    run_dir = tmp_path / "debug"
    rows = train_and_read_metrics(run_dir, "experiment=debug", "eval.max_tasks=1")
    training = [row for row in rows if row["iteration"] >= 1 and "rollout/reward_mean" in row]
    steps = sum(row.get("learn/num_steps", 0) for row in rows)
    rewards = [row.get("rollout/reward_mean") for row in training]
    print(f"[debug on AppWorld] learner steps {steps}, mean rollout reward per iteration {rewards}")
    assert steps >= 1, [sorted(row) for row in rows]
    assert max(row.get("learn/global_step", 0) for row in rows) >= 1
    warm = json.loads((run_dir / "warm_model" / "warm_start.json").read_text())
    preset = compose(["experiment=debug"]).env.options
    assert warm["provenance"]["env_options"]["demos_per_task"] == preset.demos_per_task  # its warm model
