"""Typed settings of the AppWorld environment (episode hosts, sandbox, timeouts, reward)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_ROOT = REPO_ROOT / "artifacts" / "appworld"  # where scripts/build_appworld_data.py writes
DEFAULT_PYTHON = REPO_ROOT / ".venv-appworld" / "bin" / "python"  # made by scripts/install_appworld.sh
REWARD_MODES = ("partial", "success")
SANDBOX_MODES = ("strict", "available", "off")
DEMO_VALUES = ("literal", "read")


@dataclass
class AppWorldConfig:
    root: str = ""  # APPWORLD_ROOT (holds data/ and experiments/); "" = $APPWORLD_ROOT or artifacts/appworld
    python: str = ""  # interpreter of the AppWorld venv; "" = $APPWORLD_PYTHON or .venv-appworld/bin/python
    pool_size: int = 4  # episode hosts = episodes that can run at once
    host: str = "127.0.0.1"  # servers bind loopback only
    base_port: int = 0  # first port (servers use base_port + i); 0 = ask the OS for free ports
    start_timeout_s: float = 120.0  # spawn -> answering HTTP
    warm_up: bool = (
        True  # each host opens and closes one world at start (the first costs ~8 s), so forks start warm
    )
    warm_up_task_id: str = ""  # task used to warm up; "" = first task of the first non-empty split
    # hosts are forked from one warmed-up factory process (host/factory.py), not each spawned to import AppWorld
    # and warm up on its own (~6.4 CPU-s a host: 51 CPU-s for a pool of 8 on the 2-core EPYC)
    fork_hosts: bool = True
    request_timeout_s: float = 30.0  # HTTP timeout of the light calls (task_completed, close, health)
    initialize_timeout_s: float = 90.0  # HTTP timeout of /initialize (a cold world loads every app DB)
    execute_timeout_s: int = (
        20  # AppWorld's own per-cell timeout (SIGALRM); +grace_s the host kills the episode
    )
    # a cell still running at execute_timeout_s + grace_s ends its episode (timeout; scored on its state)
    grace_s: float = 10.0
    evaluate_timeout_s: float = 60.0  # HTTP timeout of /evaluate
    max_interactions: int = 50  # code cells per episode; the step that reaches it ends the episode
    max_api_calls_per_interaction: int = 1000  # AppWorld's per-cell API call cap
    # a larger cell output ends the episode (output_too_large; scored on its state)
    max_output_bytes: int = 4_000_000
    # AppWorld's own name guard (subprocess, socket, open for writing, ... -> error output). It is not a
    # security boundary (`import os` and every `appworld.*` module pass it); the sandbox below is.
    raise_on_unsafe_syntax: bool = True
    # available: refuse to start without namespaces and seccomp, use Landlock where offered | strict: also require
    # Landlock with scoping (ABI >= 6) | off: run the policy's code unconfined (a warning at every start)
    sandbox: str = "available"
    memory_limit_mb: int = 4096  # RLIMIT_AS of an episode process
    file_size_limit_mb: int = 256  # RLIMIT_FSIZE of an episode process
    cpu_limit_s: int = 600  # RLIMIT_CPU of an episode process (whole episode; the API process stops at 90 %)
    open_files_limit: int = 256  # RLIMIT_NOFILE of an episode process
    # size of the policy process's tmpfs (its only writable place); the apps' saved state is capped at the
    # smaller of this and file_size_limit_mb (the call that crosses it is undone and ends the episode)
    scratch_limit_mb: int = 64
    scratch_inodes: int = 4096  # files + folders in that tmpfs
    reward: str = "partial"  # partial = passed/num_tests | success = 1 if all tests pass else 0
    experiment_prefix: str = "loop_agents"  # prefix of generated per-episode experiment names
    keep_episode_outputs: bool = False  # keep outputs of episodes with generated experiment names
    acquire_timeout_s: float = 600.0  # waiting for a free server longer than this is an env failure
    # warm start (learner.sft_epochs > 0; self-made data only): scripted episodes of env.train_split
    demos_per_task: int = 8  # demonstrations drawn per scripted train task
    demo_noise: float = 0.5  # probability that a demonstration is a noisy one (one wrong API/argument/answer)
    demo_seed: int = 0  # seed of the noisy variants and of the draw
    demo_literal_weight: float = 1.0  # SFT loss weight of the tokens spelling the task's own values
    # literal: the scripts write the task's values (`tag = 'travel'`); read: they read them from the
    # instruction (`apis.supervisor.show_active_task()`), so no value has to be copied token for token
    demo_values: str = "literal"

    def __post_init__(self) -> None:
        if self.reward not in REWARD_MODES:
            raise ValueError(f"appworld reward must be one of {REWARD_MODES}, got {self.reward!r}")
        if self.pool_size < 1:
            raise ValueError(f"appworld pool_size must be >= 1, got {self.pool_size}")
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"appworld servers must bind loopback, got host {self.host!r}")
        if self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"env.options.sandbox must be one of {SANDBOX_MODES}, got {self.sandbox!r}")
        if self.demos_per_task < 1:
            raise ValueError(f"env.options.demos_per_task must be >= 1, got {self.demos_per_task}")
        if not self.demo_literal_weight > 0:
            raise ValueError(f"env.options.demo_literal_weight must be > 0, got {self.demo_literal_weight}")
        if self.demo_values not in DEMO_VALUES:
            raise ValueError(
                f"env.options.demo_values must be one of {DEMO_VALUES}, got {self.demo_values!r}"
            )
        if not 0.0 <= self.demo_noise <= 1.0:
            raise ValueError(f"env.options.demo_noise must be in [0, 1], got {self.demo_noise}")
        if self.execute_timeout_s < 1 or self.max_interactions < 1:
            raise ValueError("appworld execute_timeout_s and max_interactions must be >= 1")

    @property
    def root_path(self) -> Path:
        """The APPWORLD_ROOT in use (must contain data/)."""
        return Path(self.root or os.environ.get("APPWORLD_ROOT") or DEFAULT_ROOT).resolve()

    @property
    def python_path(self) -> Path:
        """The AppWorld venv's interpreter."""
        return Path(self.python or os.environ.get("APPWORLD_PYTHON") or DEFAULT_PYTHON)

    def check_installed(self) -> None:
        """Clear errors for a missing venv or data root, before any server is started."""
        if not self.python_path.exists():
            raise FileNotFoundError(
                f"AppWorld venv python {self.python_path} not found: run scripts/install_appworld.sh"
            )
        if not (self.root_path / "data" / "tasks").is_dir():
            raise FileNotFoundError(
                f"no AppWorld data under {self.root_path / 'data'}: run scripts/build_appworld_data.py "
                "or set APPWORLD_ROOT to the official data"
            )
