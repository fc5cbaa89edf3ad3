"""The shared warm-model cache: the key changes with the base model, the demonstrations and the settings; a hit
copies the cached model into the run without training, a miss trains once and caches."""

from __future__ import annotations

from pathlib import Path

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
