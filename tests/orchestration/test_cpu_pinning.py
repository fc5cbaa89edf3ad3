"""gpu_allocation=cpu_split: the learner and the sampler on separate CPUs (cpu_pinning.py); every other preset
pins nothing. The real affinity of a real child process is checked, not the settings alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from loop_agents.config.load import ConfigError, compose
from loop_agents.inference.process import _before_exec
from loop_agents.orchestration import inference_settings
from loop_agents.orchestration.cpu_pinning import inference_cpus, learner_cpus, learner_threads, pin
from loop_agents.orchestration.placement import plan


def test_cpu_split_pins_learner_and_sampler_apart_and_cpu_pins_nothing() -> None:
    split = compose(["experiment=demo", "gpu_allocation=cpu_split"])
    assert learner_cpus(split) == [0] and inference_cpus(split) == [1]
    server = inference_settings.inference_config(split, "/model", {"threads": 1, "kv_cache_gb": 1})
    assert server.cpu_affinity == [1] and server.cpu_threads_bind == "1"  # engine threads on the server's CPU
    plain = compose(["experiment=demo"])
    assert learner_cpus(plain) == [] and inference_cpus(plain) == []
    server = inference_settings.inference_config(plain, "/model", {"threads": 1, "kv_cache_gb": 1})
    assert server.cpu_affinity is None and server.cpu_threads_bind is None


def test_the_learner_takes_at_most_one_thread_per_pinned_cpu() -> None:
    """experiment=demo asks for 2 learner threads; cpu_split pins the learner to one CPU: it steps with 1 (the
    warm start keeps the 2 its cached model was keyed by), and unpinned it keeps its 2."""
    split = compose(["experiment=demo", "gpu_allocation=cpu_split"])
    assert split.gpu_allocation.cpu_learner_threads == 2 and learner_threads(split) == 1
    assert plan(split)["learner_ranks"][0]["threads"] == 1
    wide = compose(["experiment=demo", "gpu_allocation=cpu_split", "gpu_allocation.cpu_learner_cpus=[0,2,3]",
                    "gpu_allocation.cpu_inference_cpus=[1]"])  # fmt: skip
    assert learner_threads(wide) == 2  # never more than asked
    plain = compose(["experiment=demo"])
    assert learner_threads(plain) == 2 and plan(plain)["learner_ranks"][0]["threads"] == 2


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_a_server_child_and_its_children_run_on_the_pinned_cpu() -> None:
    cpu = max(os.sched_getaffinity(0))
    code = "import os, subprocess, sys; print(sorted(os.sched_getaffinity(0))); sys.stdout.flush(); " + (
        "subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=_before_exec([cpu]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [f"[{cpu}]", f"[{cpu}]"]  # the server and the engine process it spawns


def test_pin_names_a_cpu_this_process_cannot_use() -> None:
    with pytest.raises(ValueError, match=r"cannot pin the learner to CPUs \[4096\]: Invalid argument"):
        pin([4096], "learner")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_a_process_pinned_to_one_cpu_can_move_to_another() -> None:
    """A Ray actor starts with the learner's affinity (CPU 0) and moves itself to the sampler's CPU."""
    first, second = sorted(os.sched_getaffinity(0))[:2]
    code = (
        "import os; from loop_agents.orchestration.cpu_pinning import pin; "
        f"pin([{second}], 'rollout worker'); print(sorted(os.sched_getaffinity(0)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: os.sched_setaffinity(0, {first}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split("\n")[-2] == f"[{second}]", done.stdout


def test_overlapping_cpu_sets_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="must be CPU ids >= 0 with none in both"):
        compose(["gpu_allocation=cpu_split", "gpu_allocation.cpu_inference_cpus=[0]"])
