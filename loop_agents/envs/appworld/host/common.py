"""Shared parts of the episode host: settings, clock, descriptor hygiene, applying the sandbox layers."""

from __future__ import annotations

import argparse
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from loop_agents.sandbox import layers

MESSAGE_LIMIT = 64 * 1024 * 1024  # the largest message the host accepts from its evaluator


def now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # freezegun does not patch this one


POLICY_ROOT_MOUNT_POINT = (
    Path(tempfile.gettempdir()) / "loop_agents_policy_root"
)  # covered by each policy's tmpfs


class Settings:
    def __init__(self, args: argparse.Namespace, active: list[str], landlock_abi: int) -> None:
        self.root = Path(args.root).resolve()
        self.active = active
        self.landlock_abi = landlock_abi if "landlock" in active else 0
        self.limits = layers.Limits(args.memory_mb, args.file_size_mb, args.cpu_s, args.open_files)
        self.scratch_mb = args.scratch_mb
        self.scratch_inodes = args.scratch_inodes
        # what the API process may save for an episode: no more than the policy's own scratch, and each file
        # under the file-size limit its save runs with
        self.state_cap_bytes = min(args.scratch_mb, args.file_size_mb) * 2**20
        # the API process's CPU for the policy's calls: it stops answering before its own RLIMIT_CPU could end it
        self.api_cpu_budget_s = 0.9 * args.cpu_s if args.cpu_s else float("inf")
        # what every policy process's view binds read-only: the interpreter, libraries, the host's own code
        host = Path(__file__).resolve().parent
        code = [host, Path(layers.__file__).resolve().parent]
        self.policy_read_only = [
            str(p) for p in layers.system_read_paths() + code if not str(p).startswith("/dev/")
        ]
        if "namespaces" in active:
            POLICY_ROOT_MOUNT_POINT.mkdir(exist_ok=True)
        self.max_output_bytes = args.max_output_bytes
        self.grace_s = args.grace_s
        self.evaluate_timeout_s = args.evaluate_timeout_s
        self.initialize_timeout_s = args.initialize_timeout_s

    def output_dir(self, experiment: str, task_id: str) -> Path:
        return self.root / "experiments" / "outputs" / experiment / "tasks" / task_id

    def policy_setup(self, task_id: str, experiment: str) -> dict[str, Any]:
        """What policy process A needs to build B's view and limits (public paths and numbers only)."""
        return {
            "confine": "namespaces" in self.active,
            "root": str(self.root),
            "task_id": task_id,
            "experiment_name": experiment,
            "new_root": str(POLICY_ROOT_MOUNT_POINT),
            "system_paths": self.policy_read_only,
            "landlock_abi": self.landlock_abi,
            "limits": {
                "scratch_mb": self.scratch_mb,
                "scratch_inodes": self.scratch_inodes,
                "memory_mb": self.limits.memory_mb,
                "file_size_mb": min(self.limits.file_size_mb, self.scratch_mb),
                "cpu_s": self.limits.cpu_s,
                "open_files": min(self.limits.open_files, 64),
            },
        }


def close_fds_except(keep: set[int]) -> None:
    """Closes every inherited socket, pipe and other non-file descriptor (the host's HTTP sockets).

    Regular files stay: they are SQLite's read-only handles on public base DBs, which the warm
    world's cached connections still use.
    """
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2 or fd in keep:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:
            pass


def sandbox_self(settings: Settings, read: list[Path], write: list[Path]) -> float:
    """Applies the active in-process layers to the caller; returns the seconds it took."""
    began = now()
    if "landlock" in settings.active:
        # AppWorld's failure reports read the source of every frame on the stack: our own files included.
        host = Path(__file__).resolve().parent
        own_code = [host, host.parent / "episode_host.py", Path(layers.__file__).resolve().parent]
        layers.apply_landlock(layers.system_read_paths() + own_code + read, [Path("/dev/null"), *write])
    if "rlimits" in settings.active:
        layers.apply_rlimits(settings.limits)
    if "seccomp" in settings.active:
        layers.apply_seccomp()
    return now() - began
