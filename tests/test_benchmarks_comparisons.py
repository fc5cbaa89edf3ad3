"""The end-to-end benchmarks' settings, without running them (no TRL, no server): the configs our side
launches compose and validate, and TRL's reward function is the gem hunt's own reward."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from benchmarks import iteration_breakdown, trl_compare
from loop_agents.config.load import compose
from loop_agents.envs.bundled.game import GemHuntGame
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id, task_ids

ROOT = Path(__file__).resolve().parent.parent


def _trl_side():
    spec = importlib.util.spec_from_file_location(
        "trl_side", ROOT / "benchmarks" / "trl_compare" / "trl_side.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # top level imports the standard library only
    return module


def test_trl_compare_our_config_matches_the_trl_side(tmp_path):
    for case in trl_compare.CASES:
        cfg = compose(trl_compare.our_overrides(tmp_path / "model", tmp_path / "run", 4, case, "bf16"))
        assert cfg.learner.precision == "bf16" and cfg.algorithm.sampler_logprobs_if_agree
        assert cfg.env.turn_schedule.max_turns == case.turns and cfg.env.name == "bundled"
        assert cfg.algorithm.rollouts_per_task == trl_compare.GROUP_SIZE
        assert cfg.algorithm.tasks_per_iteration == trl_compare.TASKS_PER_GENERATION
        assert cfg.algorithm.minibatch_size == trl_compare.MINIBATCH and cfg.algorithm.epochs == 1
        assert cfg.algorithm.kl_coef == 0.0 and cfg.algorithm.std_normalize
        assert cfg.algorithm.clip_low == 0.8 and cfg.algorithm.clip_high == 1.2
        assert cfg.llm.max_new_tokens == case.max_new_tokens and cfg.llm.lora.r == 8
        assert cfg.env.concurrency == trl_compare.CONCURRENCY
        # room for every turn: prompt (~70 tokens) + turns x (generation + observation ~40 tokens)
        assert cfg.llm.max_model_len >= 70 + case.turns * (case.max_new_tokens + 40)
    ids = trl_compare.prompt_order(2)
    assert len(ids) == 2 * trl_compare.TASKS_PER_GENERATION and set(ids) <= set(task_ids("train"))
    # a time-to-reward round's seed reaches our run and the task order TRL is fed
    case = next(c for c in trl_compare.CASES if c.target_reward is not None)
    cfg = compose(trl_compare.our_overrides(tmp_path / "model", tmp_path / "run", 4, case, "fp32", seed=2))
    assert cfg.run.seed == 2 and trl_compare.prompt_order(2, seed=2) != ids


def test_time_to_target_ratio_is_of_the_medians_and_needs_every_run_to_arrive():
    assert trl_compare.time_to_target_ratio([30.0, 20.0, 25.0], [40.0, 50.0, 45.0]) == 1.8
    assert trl_compare.time_to_target_ratio([30.0, None], [40.0, 41.0]) is None
    assert trl_compare.time_to_target_ratio([30.0], [None]) is None


def test_trl_multi_turn_reward_is_what_the_rollout_recorded():
    assert _trl_side().episode_reward([[], []], episode_reward=[0.25, 1]) == [0.25, 1.0]


def test_trl_reward_is_the_gem_hunt_reward():
    reward = _trl_side().gem_hunt_reward
    tid = task_ids("train")[3]
    game = GemHuntGame(generate_task(parse_task_id(tid)), spare_moves=1)
    right = game.optimal_action()
    game.step(right)
    completions = [
        [{"role": "assistant", "content": f"  {right}. "}],
        [{"role": "assistant", "content": "x"}],
    ]
    assert reward(completions, [tid, tid]) == [game.reward, 0.0]
    assert game.reward > 0


def test_iteration_breakdown_configs_compose(tmp_path):
    for asynchronous in (False, True):
        cfg = compose(iteration_breakdown.overrides(str(tmp_path / "run"), 5, 8, 4, asynchronous))
        assert cfg.rollout.async_one_step_off is asynchronous
        assert not cfg.algorithm.recompute_old_logprobs and cfg.algorithm.abs_adv_threshold == 0.0
