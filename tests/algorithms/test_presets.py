"""One source of truth for algorithm presets: `preset(name)` is what `algorithm=<name>` trains with."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loop_agents.algorithms import preset
from loop_agents.config.load import CONF_DIR, compose
from loop_agents.orchestration.components import algorithm_config

YAML_PRESETS = sorted(path.stem for path in (CONF_DIR / "algorithm").glob("*.yaml"))


def test_every_yaml_preset_is_a_registry_preset():
    assert YAML_PRESETS == ["dr_grpo", "grpo", "gspo", "loop", "ppo_gae", "reinforce_pp", "rloo"]


@pytest.mark.parametrize("name", YAML_PRESETS)
def test_registry_preset_equals_what_training_composes(name):
    trained = algorithm_config(compose([f"algorithm={name}"]))
    assert trained.loss_divisor == compose([f"algorithm={name}"]).algorithm.minibatch_size
    assert replace(trained, loss_divisor=None) == preset(name)


def test_the_presets_that_used_to_disagree_by_hand():
    """rloo, reinforce_pp and ppo_gae had other values in the registry than in conf/algorithm (issue 20)."""
    rloo = preset("rloo")
    assert (rloo.advantage_estimator, rloo.clip_enabled, rloo.ratio_level, rloo.abs_adv_threshold) == (
        "rloo",
        False,
        "trajectory",
        0.0,
    )
    reinforce_pp = preset("reinforce_pp")
    assert (reinforce_pp.aggregation, reinforce_pp.kl_coef, reinforce_pp.clip_low) == ("grpo", 0.001, 0.8)
    ppo_gae = preset("ppo_gae")
    # The LOOP paper's critic baseline: γ = λ = 1 (λ 0.95 diverged there).
    assert (ppo_gae.advantage_estimator, ppo_gae.gamma, ppo_gae.lam, ppo_gae.clip_high) == (
        "gae",
        1.0,
        1.0,
        1.2,
    )


def test_loop_variants_differ_from_loop_only_where_named():
    loop = preset("loop")
    assert loop.clip_low == pytest.approx(1 / 1.1) and loop.abs_adv_threshold == 0.01
    assert preset("loop_per_turn") == replace(loop, ratio_level="turn")
    assert preset("sft") == replace(loop, loss="sft", aggregation="token_mean", abs_adv_threshold=0.0)
