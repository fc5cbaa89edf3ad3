"""The performance keys compose from Hydra into the learner's config, and bad values name their key."""

from __future__ import annotations

import pytest

from loop_agents.config.load import compose
from loop_agents.config.validate import ConfigError
from loop_agents.orchestration.components import learner_config


def test_defaults_reach_the_learner_config():
    cfg = compose([])
    learner = learner_config(cfg, "/model")
    assert (learner.share_prefix, learner.share_prefix_min_tokens, learner.precision) == ("auto", 32, "fp32")
    assert learner.recompute_old_logprobs and not learner.sampler_logprobs_if_agree  # LOOP's reference


def test_overrides_reach_the_learner_config():
    cfg = compose(
        [
            "learner.share_prefix=off",
            "learner.precision=auto",
            "algorithm.sampler_logprobs_if_agree=true",
            "algorithm.sampler_logprobs_tolerance=1e-4",
            "algorithm.sampler_logprobs_recheck_every=3",
        ]
    )
    learner = learner_config(cfg, "/model")
    assert (learner.share_prefix, learner.precision) == ("off", "auto")
    assert learner.sampler_logprobs_if_agree
    assert (learner.sampler_logprobs_tolerance, learner.sampler_logprobs_recheck_every) == (1e-4, 3)


@pytest.mark.parametrize(
    "override,message",
    [
        ("learner.share_prefix=always", "learner.share_prefix='always' is not allowed"),
        ("learner.precision=fp16", "learner.precision='fp16' is not allowed"),
        ("learner.share_prefix_min_tokens=0", "learner.share_prefix_min_tokens=0 is out of range"),
        ("algorithm.sampler_logprobs_tolerance=0", "algorithm.sampler_logprobs_tolerance=0"),
    ],
)
def test_bad_values_name_the_key(override: str, message: str):
    with pytest.raises(ConfigError) as info:
        compose([override])
    assert message in str(info.value) and "\n" not in str(info.value)
