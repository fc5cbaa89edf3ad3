"""Run one episode's program as a process of its own: its environment, its time limit, and how it is stopped.

The program runs in a new session (its own process group), so stopping it stops whatever it started too. It is
stopped (SIGKILL to the group) when it outlives `timeout_s`, when the episode ends on the gateway's side (`stop`
set: budgets, the environment's done, an inference or environment failure), or when the collection is cancelled.
Its output (stdout and stderr together) is kept as a bounded tail for the episode's error line; nothing it prints
can fill memory or block it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loop_agents.redaction import is_secret_env_name

TAIL_CHARS = 2000


@dataclass
class ProgramOutcome:
    """How the program's process ended."""

    exit_code: int | None  # None: it was stopped (timed out or the episode ended first)
    timed_out: bool
    output_tail: str  # the last TAIL_CHARS of what it printed
    seconds: float


def program_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment without the run's secrets (the vLLM key, wandb's: `redaction`'s names), plus
    `extra`, with the worker's import path (a callable imports as it did here)."""
    env = {name: value for name, value in os.environ.items() if not is_secret_env_name(name)}
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *env.get("PYTHONPATH", "").split(os.pathsep)]))
    env.update(extra)
    return env


async def _keep_tail(stream: asyncio.StreamReader, tail: list[str]) -> None:
    while chunk := await stream.read(65536):
        tail[0] = (tail[0] + chunk.decode(errors="replace"))[-TAIL_CHARS:]


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a program started in a session of its own), if it is still there."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_program(
    argv: Sequence[str], env: Mapping[str, str], timeout_s: float, stop: asyncio.Event
) -> ProgramOutcome:
    """Start `argv`, wait until it exits, `timeout_s` passes or `stop` is set; the process is gone on return."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    tail = [""]
    reader = asyncio.ensure_future(_keep_tail(process.stdout, tail))  # type: ignore[arg-type]
    exited = asyncio.ensure_future(process.wait())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({exited, stopped}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finished = exited.done()
        kill_group(process.pid)  # still running, or exited leaving children behind: the whole group goes
        await process.wait()
        try:
            await asyncio.wait_for(reader, 5)
        except TimeoutError:
            reader.cancel()
        return ProgramOutcome(
            exit_code=process.returncode if finished else None,
            timed_out=not finished and not stop.is_set(),
            output_tail=tail[0],
            seconds=loop.time() - started,
        )
    finally:
        stopped.cancel()
        if process.returncode is None:  # cancelled (a straggler cut): never leave the program running
            kill_group(process.pid)
            exited.cancel()
            reader.cancel()
