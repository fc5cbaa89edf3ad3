"""A thin supervisor for single-process runs: when the training process dies unexpectedly (`kill -9`, the
OOM killer, a segfault, the local Ray head dying under it), the same command runs again and resumes from
the newest complete checkpoint.

`python -m loop_agents.train ...` becomes this parent and one child running the real training. Each
restart is one line with the reason and the iteration it resumes at. Restarted: deaths by signal, errors the
child classed as transient, and a hard exit without a Python error (loop_agents/failures.py). Not restarted:
exit 0 (done), exit 2 (bad input named in one line: bad config, a missing model, an unwritable run.dir, a
damaged checkpoint with none before it), exit 3 (a Python error not known to be transient: the same command
would meet it again; one line says so), and a child stopped because the supervisor itself was interrupted
(Ctrl-C, SIGTERM: forwarded once).
`run.auto_resume_attempts` bounds the restarts in a row that produced no new checkpoint; then the run
stops with a line saying that the same command resumes. Multi-process launches (`torchrun`, `accelerate
launch` with several processes) are not supervised here: their launcher restarts the worker group
(`--max_restarts`) and every rank resumes from the same checkpoint.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from loop_agents.child_process import die_with_parent
from loop_agents.failures import UNRECOVERABLE, worth_retrying

SUPERVISED_ENV = "LOOP_AGENTS_SUPERVISED"  # set in the child: it trains instead of supervising
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")  # learner/checkpoint.py's names; `done` marks a complete one


def should_supervise(attempts: int, environ: dict[str, str] | None = None) -> bool:
    """True in the launching process of a single-process run with auto-resume on."""
    env = os.environ if environ is None else environ
    if attempts <= 0 or env.get(SUPERVISED_ENV) == "1":
        return False
    return "TORCHELASTIC_RUN_ID" not in env and int(env.get("WORLD_SIZE", "1")) == 1


def missing_model_path(model_path: str) -> str | None:
    """The error line for a local `llm.model_path` (absolute, ./, ../ or ~) that does not exist, else None."""
    if not model_path.startswith(("/", "./", "../", "~")):
        return None  # `tiny` or a Hugging Face hub id
    if Path(model_path).expanduser().exists():
        return None
    return f"config error: llm.model_path {model_path} does not exist"


def last_checkpoint_iteration(run_dir: Path) -> int | None:
    """Iteration of the newest complete checkpoint under `run_dir/checkpoints` (None if there is none);
    the same choice as `learner.checkpoint.latest_complete_checkpoint`, without importing torch."""
    folder = run_dir / "checkpoints"
    found = [
        int(match.group(1))
        for child in (folder.iterdir() if folder.is_dir() else [])
        if (match := _CHECKPOINT.match(child.name)) and (child / "done").is_file()
    ]
    return max(found) if found else None


def describe_exit(code: int) -> str:
    """'killed by SIGKILL' or 'exited with code 1'."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def resume_point(run_dir: Path) -> str:
    """'checkpoint-N (iteration N+1)' or 'the start' where no checkpoint is complete yet."""
    last = last_checkpoint_iteration(run_dir)
    return "the start" if last is None else f"checkpoint-{last} (iteration {last + 1})"


def train_command(overrides: list[str]) -> list[str]:
    """The child's command line: the same training with the same overrides."""
    return [sys.executable, "-m", "loop_agents.train", *overrides]


def supervise(command: list[str], run_dir: Path, attempts: int) -> int:
    """Run `command` (train_command) until it finishes or cannot be resumed; returns the exit code."""
    env = {**os.environ, SUPERVISED_ENV: "1"}
    child: subprocess.Popen | None = None
    interrupted: list[int] = []

    def forward(signum, _frame) -> None:
        interrupted.append(signum)
        if child is not None and child.poll() is None and len(interrupted) == 1:
            child.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    in_a_row = 0
    while True:
        before = last_checkpoint_iteration(run_dir)
        # its own process group: a terminal's Ctrl-C reaches it once, through `forward`
        child = subprocess.Popen(command, env=env, process_group=0, preexec_fn=_die_with_parent)
        code = child.wait()
        if code == 0 or code == UNRECOVERABLE or interrupted:
            return code if code >= 0 else 128 - code
        if not worth_retrying(code):
            print(
                f"[supervisor] training process {describe_exit(code)}: not a crash a restart can get past (the "
                f"error above says why); not restarted. Fix it and run the same command: it resumes from "
                f"{resume_point(run_dir)}",
                file=sys.stderr,
                flush=True,
            )
            return code
        after = last_checkpoint_iteration(run_dir)
        progressed = after is not None and (before is None or after > before)
        in_a_row = 1 if progressed else in_a_row + 1
        if in_a_row > attempts:
            print(
                f"[supervisor] training process {describe_exit(code)} {in_a_row} times in a row without a new "
                f"checkpoint (run.auto_resume_attempts={attempts}); stopping. Fix the cause and run the same "
                f"command: it resumes from {resume_point(run_dir)}",
                file=sys.stderr,
                flush=True,
            )
            return code if code >= 0 else 128 - code
        print(
            f"[supervisor] training process {describe_exit(code)}; resuming from {resume_point(run_dir)}, "
            f"restart {in_a_row} of run.auto_resume_attempts={attempts} in a row",
            file=sys.stderr,
            flush=True,
        )


def _die_with_parent() -> None:
    die_with_parent()
