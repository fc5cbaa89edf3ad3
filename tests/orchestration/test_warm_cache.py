"""The shared warm-model cache: the key changes with the base model, the demonstrations and the settings; a hit
copies the cached model into the run without training, a miss trains once and caches."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loop_agents.config.load import compose
from loop_agents.config.validate import ConfigError
from loop_agents.errors import CachedModelMismatch
from loop_agents.orchestration import warm_model
from loop_agents.orchestration.warm_cache import through_cache, warm_model_key
from loop_agents.rollout.trajectory import Trajectory


def _demo(ids: list[int]) -> Trajectory:
    traj = Trajectory(task_id="t_1", group_id="demo/t_1")
    traj.append_context(ids[:2])
    traj.append_generation(ids[2:], [0.0] * len(ids[2:]))
    return traj


def test_key_depends_on_base_demonstrations_and_settings(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text('{"hidden_size": 64}')
    demos = [_demo([1, 2, 3, 4])]
    key = warm_model_key(base, demos, {"epochs": 3})
    assert key == warm_model_key(base, [_demo([1, 2, 3, 4])], {"epochs": 3})  # a pure function
    assert key != warm_model_key(base, demos, {"epochs": 4})
    assert key != warm_model_key(base, [_demo([1, 2, 3, 5])], {"epochs": 3})
    assert key != warm_model_key(base, demos, {"epochs": 3}, [[1.0, 1.0, 4.0, 1.0]])  # weighed tokens
    (base / "config.json").write_text('{"hidden_size": 128}')
    assert key != warm_model_key(base, demos, {"epochs": 3})


def test_a_miss_trains_and_caches_a_hit_only_copies(tmp_path: Path) -> None:
    builds: list[Path] = []

    def builder(out: Path):
        def build() -> Path:
            builds.append(out)
            out.mkdir(parents=True)
            (out / "model.safetensors").write_bytes(b"weights")
            (out / "warm_start.json").write_text("{}")
            return out

        return build

    first = tmp_path / "run1" / "warm_model"
    first.parent.mkdir()
    assert through_cache(tmp_path / "cache", "k1", first, builder(first)) == (first, False)
    assert (tmp_path / "cache" / "k1" / "model.safetensors").read_bytes() == b"weights"
    second = tmp_path / "run2" / "warm_model"
    second.parent.mkdir()
    assert through_cache(tmp_path / "cache", "k1", second, builder(second)) == (second, True)
    assert builds == [first] and (second / "model.safetensors").read_bytes() == b"weights"
    third = tmp_path / "run3" / "warm_model"
    third.parent.mkdir()
    through_cache(tmp_path / "cache", "k2", third, builder(third))  # another key: trained again
    assert builds == [first, third]


def test_a_resume_reuses_its_own_warm_model_without_rebuilding_the_demonstrations(
    tmp_path: Path, monkeypatch
):
    """A rerun of a run whose warm model is finished checks it as any reuse is (shape, recorded settings) and does
    not build and tokenize the demonstrations again (8,000 of them: 35-55 s of every resume)."""
    cfg = compose(["experiment=demo", f"run.dir={tmp_path}"])
    base = Path(warm_model.C.resolve_model(cfg, tmp_path))
    warm = tmp_path / "warm_model"
    shutil.copytree(base, warm)
    (warm / "warm_start.json").write_text(json.dumps({"provenance": {"lr": cfg.learner.sft_lr, "epochs": 1}}))

    def rebuilt(*args, **kwargs):
        raise AssertionError("the demonstrations were built again")

    monkeypatch.setattr(warm_model, "warm_start_inputs", rebuilt)
    with pytest.raises(CachedModelMismatch, match="epochs=1"):  # recorded settings still checked
        warm_model.policy_model_path(cfg, tmp_path)
    (warm / "warm_start.json").write_text(json.dumps({"provenance": {"lr": cfg.learner.sft_lr}}))
    assert warm_model.policy_model_path(cfg, tmp_path) == str(warm)


def test_rl_seeds_share_one_warm_start_through_sft_seed(tmp_path: Path, capsys) -> None:
    """`learner.sft_seed`: runs of other `run.seed`s start from the same tiny model and warm model (the second
    one from the cache); without it, another run.seed is another warm start."""
    shrunk = ["experiment=demo", "learner.sft_epochs=1", "learner.sft_until_p_optimal=null",
              "env.options.demo_count=16", "learner.sft_check_episodes=2", f"learner.sft_cache_dir={tmp_path / 'cache'}"]  # fmt: skip

    def warm(run: str, *overrides: str) -> Path:
        cfg = compose([*shrunk, f"run.dir={tmp_path / run}", *overrides])
        return Path(warm_model.policy_model_path(cfg, tmp_path / run))

    first = warm("s0", "run.seed=0")
    shared = warm("s1_from_0", "run.seed=1", "learner.sft_seed=0")
    assert "reused the cached warm model" in capsys.readouterr().out
    assert (first / "model.safetensors").read_bytes() == (shared / "model.safetensors").read_bytes()
    assert (tmp_path / "s1_from_0" / "tiny_model" / "model.safetensors").read_bytes() == (
        tmp_path / "s0" / "tiny_model" / "model.safetensors"
    ).read_bytes()
    own = warm("s1", "run.seed=1")
    assert "reused" not in capsys.readouterr().out
    assert (own / "model.safetensors").read_bytes() != (first / "model.safetensors").read_bytes()


def test_a_negative_sft_seed_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="learner.sft_seed"):
        compose(["experiment=demo", "learner.sft_seed=-1", f"run.dir={tmp_path}"])
