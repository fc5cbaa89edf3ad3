"""A shortened `experiment=appworld_demo` (6 iterations, dev scored at 0, 3 and 6) on the real engine: the learner
steps and the held-out dev reward moves (issue 19). The full preset's curves over 3 seeds are in docs/log/appworld-cpu.md.

The warm model comes from `artifacts/warm_models` (shared with debug); the first run on a machine builds the data,
plays 1,920 scripted episodes and trains it (~12 min on 2 idle cores), then the run takes ~8 min."""

from __future__ import annotations

from tests.orchestration.appworld_learning import LEARNING_TEST_MARKS, train_and_read_metrics

pytestmark = LEARNING_TEST_MARKS


def test_shortened_appworld_demo_steps_and_moves_dev_reward(tmp_path) -> None:
    rows = train_and_read_metrics(tmp_path / "appworld_demo", "experiment=appworld_demo", "run.iterations=6")
    steps = sum(row.get("learn/num_steps", 0) for row in rows)
    dev = {row["iteration"]: row["eval/reward_mean"] for row in rows if "eval/reward_mean" in row}
    print(f"[appworld_demo, 6 iterations] learner steps {steps}, dev partial credit by iteration {dev}")
    assert steps >= 1
    assert sorted(dev) == [0, 3, 6] and dev[6] != dev[0], dev  # the policy scored on held-out tasks changed
