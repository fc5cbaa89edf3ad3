"""The staleness bound's bookkeeping (staleness.py): per-token versions from each turn's adapter, whole groups
dropped past the bound and counted, the histogram and the mixed-version share; the deprecated switch maps to 1."""

from __future__ import annotations

from omegaconf import OmegaConf

from loop_agents.orchestration.staleness import drop_stale_groups, max_staleness, resampled_in_flight
from loop_agents.rollout.trajectory import Trajectory, Turn


def _episode(group: str, versions: list[int]) -> Trajectory:
    """A prompt of 2 tokens, then one 2-token turn per entry of `versions` (sampled by that version), each
    followed by a 1-token observation."""
    traj = Trajectory(task_id=group, group_id=group)
    traj.append_context([1, 2])
    for version in versions:
        start, end = traj.append_generation([3, 4], [-0.5, -0.6])
        traj.turns.append(Turn(gen_start=start, gen_end=end, policy_version=version))
        traj.append_context([5])
    traj.policy_version = traj.oldest_version()
    return traj


def test_token_versions_follow_each_turn() -> None:
    traj = _episode("g", [3, 4])
    assert traj.token_versions() == [None, None, 3, 3, None, 4, 4, None]
    assert traj.oldest_version() == 3


def test_groups_past_the_bound_are_dropped_whole_and_counted() -> None:
    # iteration 6: the learner holds policy 5; bound 1 allows versions 4 and 5
    fresh = [_episode("a", [4, 5]), _episode("a", [5])]
    stale = [_episode("b", [3, 4]), _episode("b", [5])]  # one member's first turn is 2 versions behind
    kept, metrics = drop_stale_groups(fresh + stale, iteration=6, bound=1)
    assert kept == fresh
    assert metrics["async/dropped_groups"] == 1 and metrics["async/dropped_episodes"] == 2
    assert metrics["async/mixed_version_share"] == 0.5  # 2 of the 4 episodes span two versions
    assert metrics["async/staleness_max"] == 2
    # tokens (2 per turn): version 5 → 0 behind (3 turns), version 4 → 1 (2 turns), version 3 → 2 (1 turn)
    assert metrics["async/staleness_tokens_0"] == 6
    assert metrics["async/staleness_tokens_1"] == 4
    assert metrics["async/staleness_tokens_2"] == 2


def test_synchronous_keeps_everything_on_policy() -> None:
    batch = [_episode("a", [2, 2]), _episode("a", [2])]
    kept, metrics = drop_stale_groups(batch, iteration=3, bound=0)
    assert kept == batch and metrics["async/dropped_groups"] == 0 and metrics["async/staleness_max"] == 0


def test_deprecated_one_step_off_is_staleness_one() -> None:
    cfg = OmegaConf.create({"algorithm": {"max_staleness": 0}, "rollout": {"async_one_step_off": True}})
    assert max_staleness(cfg) == 1
    cfg.algorithm.max_staleness = 3
    assert max_staleness(cfg) == 3
    cfg.rollout.async_one_step_off = False
    cfg.algorithm.max_staleness = 0
    assert max_staleness(cfg) == 0


def test_a_resumed_asynchronous_run_counts_the_collections_it_samples_again(capsys) -> None:
    """Resumed from checkpoint-2 with max_staleness=2 of 6 iterations: iterations 3 and 4 were in flight."""
    assert resampled_in_flight(2, 2, 6, "checkpoint-2") == {"resume/resampled_iterations": 2.0}
    assert "iteration(s) 3-4 were in flight when the run stopped" in capsys.readouterr().out
    assert resampled_in_flight(5, 2, 6, "checkpoint-5") == {
        "resume/resampled_iterations": 1.0
    }  # only 6 is left
    assert resampled_in_flight(2, 0, 6, "checkpoint-2") == {}  # synchronous: nothing ran ahead
    assert resampled_in_flight(0, 2, 6, None) == {}  # a fresh run
    assert capsys.readouterr().out.count("[resume]") == 1
