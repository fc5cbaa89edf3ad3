"""Checks of how `loop_agents.train` was launched (torchrun / accelerate launch) against the config."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from loop_agents.config.validate import ConfigError

ACCELERATE_SIMPLE_LAUNCH = "ACCELERATE_USE_CPU"  # set by accelerate's one-process ("simple") launcher only
_NUM_PROCESSES = ("--num_processes", "--num-processes")
_CONFIG_FILE = ("--config_file", "--config-file")


def launched_world_size(environ: Mapping[str, str] | None = None) -> int:
    """WORLD_SIZE set by the launcher (1 without one)."""
    return int((os.environ if environ is None else environ).get("WORLD_SIZE", "1"))


def launched_rank(environ: Mapping[str, str] | None = None) -> int:
    return int((os.environ if environ is None else environ).get("RANK", "0"))


def parent_command_line(pid: int | None = None) -> list[str]:
    """The argv of this process's parent (the launcher), [] where it cannot be read."""
    try:
        raw = Path(f"/proc/{os.getppid() if pid is None else pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _option(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def accelerate_requested_processes(argv: Sequence[str]) -> int | None:
    """The process count an `accelerate launch` command line asks for (`--num_processes`, else its
    `--config_file`'s `num_processes`, else 1); None when `argv` is not `accelerate launch`."""
    starts = [
        i + 2 if argv[i + 1 : i + 2] == ["launch"] else i + 1
        for i, arg in enumerate(argv)
        if arg == "accelerate.commands.launch"
        or (Path(arg).name == "accelerate" and argv[i + 1 : i + 2] == ["launch"])
    ]
    if not starts:
        return None
    options = argv[starts[0] :]
    count = _option(options, _NUM_PROCESSES)
    if count is None and (config_file := _option(options, _CONFIG_FILE)) is not None:
        try:
            count = str(OmegaConf.load(config_file).get("num_processes", 1))
        except (OSError, ValueError):
            return None  # accelerate itself says what is wrong with its config file
    try:
        return int(count or 1)
    except ValueError:
        return None


def _accelerate_one_process_problem(
    cfg: DictConfig, environ: Mapping[str, str], parent_argv: Sequence[str] | None
) -> str | None:
    """accelerate's simple launcher (`--cpu`, or no GPU to launch on) starts ONE process and sets no WORLD_SIZE
    whatever `--num_processes` says: a 2-rank CPU launch silently trains on one rank."""
    if ACCELERATE_SIMPLE_LAUNCH not in environ or "WORLD_SIZE" in environ:
        return None
    argv = parent_command_line() if parent_argv is None else parent_argv
    requested = accelerate_requested_processes(argv)
    if requested is None or requested == 1:
        return None
    cpu = " --cpu" if str(environ.get(ACCELERATE_SIMPLE_LAUNCH)).lower() == "true" else ""
    head = (
        f"launched with accelerate launch{cpu} --num_processes {requested}, but accelerate started 1 process (on CPU "
        "it starts one and sets no WORLD_SIZE)"
    )
    learner_gpus = list(cfg.gpu_allocation.learner_gpus)
    if cfg.gpu_allocation.device == "cuda":
        n = len(learner_gpus)
        return (
            f"{head}; gpu_allocation={cfg.gpu_allocation.name} has {n} learner GPUs {learner_gpus}: launch {n} "
            f"processes (accelerate launch --config_file conf/accelerate/fsdp2_{n}gpu.yaml, without --cpu) or pick "
            "another gpu_allocation preset"
        )
    return (
        f"{head}; for {requested} CPU learner ranks use torchrun --nproc-per-node {requested} loop_agents/train.py "
        "..., or launch with --num_processes 1"
    )


def check_world_size(
    cfg: DictConfig, environ: Mapping[str, str] | None = None, parent_argv: Sequence[str] | None = None
) -> None:
    """On GPUs one learner rank runs per `gpu_allocation.learner_gpus` entry, so the launcher must start that many
    processes (accelerate's `num_processes`, torchrun's `--nproc-per-node`). On CPU any number of gloo ranks works,
    but only torchrun starts several: `accelerate launch --cpu --num_processes 2` starts one, which is refused
    here rather than run as a silent one-rank job. `parent_argv`: the launcher's argv (read from /proc by default)."""
    environ = os.environ if environ is None else environ
    problem = _accelerate_one_process_problem(cfg, environ, parent_argv)
    if problem is not None:
        raise ConfigError(problem)
    world_size = launched_world_size(environ)
    learner_gpus = list(cfg.gpu_allocation.learner_gpus)
    if cfg.gpu_allocation.device == "cuda" and world_size != len(learner_gpus):
        raise ConfigError(
            f"launched with WORLD_SIZE={world_size} processes but gpu_allocation={cfg.gpu_allocation.name} has "
            f"{len(learner_gpus)} learner GPUs {learner_gpus}; launch {len(learner_gpus)} processes "
            f"(conf/accelerate/fsdp2_{len(learner_gpus)}gpu.yaml) or pick another gpu_allocation preset"
        )
