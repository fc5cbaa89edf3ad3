"""Every preset composes and validates; every bad input fails with one line naming the key."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop_agents.config.load import CONF_DIR, compose
from loop_agents.config.validate import ConfigError
from tests.train_command import with_own_run_dir

GROUPS = ["llm", "gpu_allocation", "algorithm", "env", "experiment"]


def _presets(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("group,preset", [(g, p) for g in GROUPS for p in _presets(g)], ids=lambda v: str(v))
def test_every_preset_composes_and_validates(group: str, preset: str) -> None:
    cfg = compose([f"{group}={preset}"])
    if group != "experiment":
        assert cfg[group].name == preset


def test_root_defaults_all_exist() -> None:
    cfg = compose([])
    assert (cfg.llm.name, cfg.gpu_allocation.name, cfg.algorithm.name, cfg.env.name) == (
        "tiny",
        "cpu",
        "loop",
        "bundled",
    )


def test_loop_preset_matches_the_paper() -> None:
    a = compose(["algorithm=loop"]).algorithm
    eps = 0.1
    assert a.advantage == "loo" and not a.std_normalize and a.kl_coef == 0.0
    assert a.clip_low == pytest.approx(1 / (1 + eps)) and a.clip_high == pytest.approx(1 + eps)
    assert (a.rollouts_per_task, a.tasks_per_iteration, a.epochs, a.abs_adv_threshold) == (6, 40, 2, 0.01)
    assert (a.lr, a.lr_schedule, a.aggregation, a.ratio_level) == (5e-5, "constant", "loop", "token")


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["algorithm.clip_hihg=0.2"], "unknown key 'algorithm.clip_hihg'"),
        (["algorithm.lr=fast"], "algorithm.lr='fast' has the wrong type; expected Float"),
        (["algorithm=ppo2"], "unknown preset 'algorithm/ppo2'; available: dr_grpo, grpo, gspo, loop"),
        (["experiment=nope"], "unknown preset 'experiment/nope'; available:"),
        (["algorithm.clip_high=0.9"], "algorithm.clip_high=0.9 is out of range; it must be >= 1.0"),
        (["algorithm.clip_low=-0.1"], "algorithm.clip_low=-0.1 is out of range; it must be > 0.0"),
        (["algorithm.rollouts_per_task=1"], "algorithm.rollouts_per_task=1 is out of range; it must be >= 2"),
        (["algorithm.entropy_coef=-0.1"], "algorithm.entropy_coef=-0.1 is out of range; it must be >= 0.0"),
        (
            ["algorithm.high_kl_threshold=0"],
            "algorithm.high_kl_threshold=0.0 is out of range; it must be > 0",
        ),
        (
            ["algorithm.advantage=median"],
            "algorithm.advantage='median' is not allowed; choose one of: loo, grpo",
        ),
        (["llm.model_path=???"], "llm.model_path is required but not set"),
        (
            ["learner.sft_attention=flash"],
            "learner.sft_attention='flash' is not allowed; choose one of: eager, sdpa",
        ),
        (
            ["gpu_allocation=one_learn_one_infer", "gpu_allocation.inference_gpus=[0]"],
            "GPUs [0] are in both learner_gpus and inference_gpus but mode=disaggregated",
        ),
        (
            ["gpu_allocation=colocated_single_gpu", "gpu_allocation.learner_memory_gb=null"],
            "mode=colocated needs gpu_allocation.learner_memory_gb",
        ),
        (["learner.max_seq_len=999999"], "learner.max_seq_len=999999 exceeds llm.max_model_len"),
        (["algorithm.max_staleness=-1"], "algorithm.max_staleness=-1 must be a whole number >= 0"),
        (
            ["algorithm.max_staleness=1.5"],
            "algorithm.max_staleness='1.5' has the wrong type; expected Integer",
        ),
        (
            ["algorithm=ppo_gae", "algorithm.max_staleness=2"],
            "asynchronous training (algorithm.max_staleness > 0 or rollout.async_one_step_off) with "
            "algorithm.advantage=gae (PPO with GAE) is not supported",
        ),
        (
            ["rollout.async_one_step_off=true", "algorithm.sampler_logprobs_if_agree=true"],
            "algorithm.sampler_logprobs_if_agree=true with asynchronous training",
        ),
        (["env.turn_schedule.kind=stepwise"], "env.turn_schedule.budgets must list at least one budget"),
        (
            ["llm.tiny.hidden_size=100", "llm.tiny.num_heads=3"],
            "llm.tiny.hidden_size=100 must be a multiple of",
        ),
        (["llm.tiny.num_kv_heads=0"], "llm.tiny.num_kv_heads=0 is out of range; it must be >= 1"),
        (
            ["gpu_allocation.cpu_kv_block_size=24"],
            "gpu_allocation.cpu_kv_block_size=24 must be a positive multiple of 16",
        ),
        (
            ["gpu_allocation.cpu_shm_busy_loop_s=-1"],
            "gpu_allocation.cpu_shm_busy_loop_s=-1.0 must be >= 0 seconds or null",
        ),
        (
            ["env=appworld", "env.options.rooot=/data"],
            "env.options.rooot: not a setting of env 'appworld' (check the spelling); allowed: ",
        ),
        (
            ["env=babyai", "env.options.retries=many"],
            "env.options.retries='many' has the wrong type; expected",
        ),
        (["env=bundled", "env.options.demo_noise=2"], "env.options.demo_noise must be in [0, 1], got 2.0"),
        (["env=textcraft", "env.options.env=chess"], "env.options.env='chess' is not a game we can serve"),
        (["env=appworld", "env.options.pool_size=0"], "env.options: appworld pool_size must be >= 1, got 0"),
    ],
)
def test_bad_config_names_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    text = str(info.value)
    assert message in text
    assert "\n" not in text, "one line, no traceback wall"


def test_cli_prints_one_line_and_exits_2() -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "loop_agents.train", "algorithm.clip_hihg=0.2"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "config error: unknown key 'algorithm.clip_hihg' (not a field of AlgorithmConfig; check the spelling)"
    ]


def test_cfg_job_prints_composed_config() -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "loop_agents.train", "--cfg", "job", "experiment=demo"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "name: demo" in proc.stdout and "advantage: loo" in proc.stdout


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["env=appworld", "env.options.rooot=/data"],
            "config error: env.options.rooot: not a setting of env 'appworld' (check the spelling); allowed: ",
        ),
        (
            ["env=appworld", "env.options.root={missing}"],
            "config error: env.options.root: no AppWorld data under {missing}/data/tasks; point it at a root",
        ),
    ],
)
def test_bad_env_options_stop_train_with_one_line(args: list[str], line: str, tmp_path: Path) -> None:
    """A misspelled option and a data root without data: one line at start-up, exit code 2, nothing started."""
    missing = tmp_path / "no_appworld"
    root = Path(__file__).resolve().parents[2]
    if not (root / ".venv-appworld" / "bin" / "python").exists() and "root" in args[1]:
        pytest.skip("the AppWorld venv is checked first: run scripts/install_appworld.sh")
    proc = subprocess.run(
        [sys.executable, "-m", "loop_agents.train", *[a.format(missing=missing) for a in args]],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(line.format(missing=missing)), lines
    assert not missing.exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["+algorithm.rollouts_per_tsk=4"],
            "unknown key 'algorithm.rollouts_per_tsk' (not a field of AlgorithmConfig",
        ),
        (["experiment=demo", "+llm.lora.rr=4"], "unknown key 'llm.lora.rr' (not a field of LoraConfig"),
        (["+seed=1"], "unknown key 'seed' (not a field of RootConfig"),
        (["+env.options.spare_mooves=2"], "env.options.spare_mooves: not a setting of env 'bundled'"),
    ],
)
def test_a_plus_typo_is_an_unknown_key(overrides: list[str], message: str) -> None:
    """`+key=value` appends a key Hydra does not check against the schema: it gets the unknown-key line."""
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_plus_adds_an_env_option_as_documented() -> None:
    assert compose(["+env.options.spare_moves=2"]).env.options.spare_moves == 2


def test_a_presets_family_keys_stay_with_its_family() -> None:
    """experiment=demo's gem-hunt options and appworld_hard's splits and prompt (through appworld_demo) are written
    for their family: with another env each is replaced by that family's own, with the command line's env.options."""
    demo = compose(["experiment=demo", "env=openenv", "env.options.url=http://127.0.0.1:9"])
    assert "demo_count" not in demo.env.options and demo.env.options.url == "http://127.0.0.1:9"
    assert (
        demo.algorithm.rollouts_per_task == 6 and demo.learner.sft_target == "full"
    )  # the rest of the preset
    hard = compose(["experiment=appworld_hard", "env=bundled"])
    assert (hard.env.train_split, hard.env.eval_split, hard.eval.split, hard.env.prompt) == (
        "train",
        "dev",
        "dev",
        "full",
    )
    assert compose(["experiment=demo"]).env.options.demo_count == 8000  # its own family keeps them


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["experiment=demo", "+algorithm.rollouts_per_tsk=4"], "config error: unknown key 'algorithm.rollouts_per_tsk'"),
        (["experiment=appworld_hard", "env=bundled", "llm.model_path=./no_such_model"],
         "config error: llm.model_path ./no_such_model does not exist"),
        (["experiment=demo", "env=openenv", "env.options.serve_family=bundled"],
         "config error: learner.sft_epochs=2 needs warm-start demonstrations: env=openenv borrows them"),
    ],
)  # fmt: skip
def test_bad_input_through_a_preset_is_one_line_exit_2_within_20_s(args: list[str], line: str) -> None:
    root = Path(__file__).resolve().parents[2]
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "loop_agents.train", *with_own_run_dir(args)], cwd=root,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    seconds = time.monotonic() - began
    errors = proc.stderr.strip().splitlines()  # the [config] note on a preset's family keys goes to stdout
    assert proc.returncode == 2 and len(errors) == 1 and errors[0].startswith(line), proc.stderr[-2000:]
    assert seconds < 20, seconds
