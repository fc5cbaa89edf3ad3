"""PPO with GAE needs a critic: every experiment preset composes and validates with `algorithm=ppo_gae`, and the
learner it configures gets the value head (the ablation runs it on any preset; no preset lacks one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop_agents.config.load import CONF_DIR, compose
from loop_agents.config.validate import ConfigError
from loop_agents.orchestration.components import algorithm_config, learner_config

PRESETS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def test_the_presets_are_found() -> None:
    assert {"demo", "appworld_demo", "appworld_hard", "appworld_loop_32b"} <= set(PRESETS)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_runs_ppo_with_its_critic(preset: str, tmp_path: Path) -> None:
    cfg = compose([f"experiment={preset}", "algorithm=ppo_gae", f"run.dir={tmp_path}"])
    assert algorithm_config(cfg).advantage_estimator == "gae"
    # the critic the trainer asks for (learner/trainer.py)
    assert learner_config(cfg, "model").value_head_hidden
    loop = compose([f"experiment={preset}", "algorithm=loop", f"run.dir={tmp_path}"])
    assert learner_config(loop, "model").value_head_hidden == []  # LOOP: no critic


def test_the_one_setting_without_a_critic_is_one_line() -> None:
    """Asynchronous sampling gives GAE no value of the current policy: one line naming the key."""
    with pytest.raises(ConfigError, match="algorithm.max_staleness") as error:
        compose(["experiment=demo", "algorithm=ppo_gae", "algorithm.max_staleness=1"])
    assert "\n" not in str(error.value)
