"""The trainer's step time-out must outlast an AppWorld cell: a slow cell is the policy's (scored as `timeout` by the
host), and a step time-out shorter than the cell's own budget would turn it into a lost `env_timeout` episode
instead (the policy could drop its own episodes by writing slow code)."""

from __future__ import annotations

import pytest

from loop_agents.config.load import compose
from loop_agents.envs.selected import check_environment
from loop_agents.errors import ConfigError


def test_a_step_timeout_shorter_than_a_cell_may_run_is_one_config_line():
    check_environment(compose(["experiment=appworld_demo"]))  # the defaults: 120 s against 20 + 10 + 30
    with pytest.raises(ConfigError, match=r"^rollout\.env_timeout_s=120\.0 is shorter than an AppWorld cell"):
        check_environment(compose(["experiment=appworld_demo", "env.options.execute_timeout_s=200"]))
    check_environment(
        compose(
            ["experiment=appworld_demo", "env.options.execute_timeout_s=200", "rollout.env_timeout_s=300"]
        )
    )
