"""A rollout worker's side of the fork server (fork_server.py): one episode's program, forked instead of spawned.

`ForkedPrograms.run` has `launch.run_program`'s contract (the process is gone on return; stopped when it outlives
`timeout_s` or when `stop` is set; its exit code and output tail) for a callable program, at the cost of a fork.
The server is started on first use and again after it died (a dead server fails only the episodes it was running:
their processes die with it, each an `internal error`, lost and retried as the gateway's own failure).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Mapping, Sequence

from loop_agents.gateway.launch import ProgramOutcome, kill_group, program_environment

START_TIMEOUT_S = 120.0  # the program's imports


class ForkServerError(RuntimeError):
    """The fork server did not start or went away (the gateway's failure, not the program's)."""


class ForkedPrograms:
    """Episodes of one callable (`module:function`), forked from a process that imported it and `preload`."""

    def __init__(self, spec: str, preload: Sequence[str] = ()) -> None:
        self.spec = spec
        self.preload = tuple(preload)
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None
        self._starting = asyncio.Lock()
        self._ids = itertools.count()
        self._started: dict[int, asyncio.Future] = {}  # id -> its pid
        self._exited: dict[int, asyncio.Future] = {}  # id -> (exit code, tail)
        self._sent_to: dict[int, asyncio.subprocess.Process] = {}  # id -> the server that runs it

    async def _ensure_started(self) -> asyncio.subprocess.Process:
        async with self._starting:
            if self._process is not None and self._process.returncode is None:
                return self._process
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "loop_agents.gateway.fork_server", self.spec, *self.preload,
                env=program_environment({}),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=2**20,
            )  # fmt: skip
            try:
                first = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)  # type: ignore[union-attr]
                ready = json.loads(first or b"{}")
            except (TimeoutError, json.JSONDecodeError) as err:
                ready = {"error": f"did not start: {err!r}"}
            if not ready.get("ready"):
                if process.returncode is None:
                    process.kill()
                await process.wait()
                raise ForkServerError(
                    f"the fork server of {self.spec} failed: {ready.get('error', 'exited')}"
                )
            self._process = process
            self._reader = asyncio.ensure_future(self._read(process))
            return process

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        try:
            while line := await process.stdout.readline():  # type: ignore[union-attr]
                message = json.loads(line)
                episode = int(message["id"])
                if "pid" in message and episode in self._started:
                    self._started[episode].set_result(int(message["pid"]))
                elif "exit" in message and episode in self._exited:
                    self._exited[episode].set_result((int(message["exit"]), str(message.get("tail", ""))))
            await process.wait()  # reaped, its pipes closed
        finally:
            if self._process is process:  # the next episode starts a new server
                self._process = None
            gone = ForkServerError(f"the fork server of {self.spec} exited")
            for episode in [e for e, owner in self._sent_to.items() if owner is process]:
                started = self._started.get(episode)
                if started is not None and started.done() and not started.exception():
                    kill_group(started.result())  # its leader died with the server; the rest of its group now
                for future in (started, self._exited.get(episode)):
                    if future is not None and not future.done():
                        future.set_exception(gone)

    async def _send(self, process: asyncio.subprocess.Process, message: dict) -> None:
        try:
            process.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
            await process.stdin.drain()  # type: ignore[union-attr]
        except (ConnectionError, RuntimeError) as err:
            raise ForkServerError(f"the fork server of {self.spec} went away: {err!r}") from None

    async def run(self, env: Mapping[str, str], timeout_s: float, stop: asyncio.Event) -> ProgramOutcome:
        """Fork the program with `env` (program_environment's), wait until it exits, `timeout_s` passes or `stop`
        is set; its whole group is gone on return (ForkServerError if the server is)."""
        process = await self._ensure_started()
        loop = asyncio.get_running_loop()
        episode = next(self._ids)
        started, exited = loop.create_future(), loop.create_future()
        self._started[episode], self._exited[episode] = started, exited
        self._sent_to[episode] = process
        begun = loop.time()
        try:
            await self._send(process, {"id": episode, "env": dict(env)})
            stopped = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({exited, stopped}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
            finished = exited.done()
            if not finished:
                await self._send(process, {"id": episode, "kill": True})
            code, tail = await exited
            return ProgramOutcome(
                exit_code=code if finished else None,
                timed_out=not finished and not stop.is_set(),
                output_tail=tail,
                seconds=loop.time() - begun,
            )
        except asyncio.CancelledError:  # a straggler cut: never leave the program running
            if not exited.done() and self._process is process and process.returncode is None:
                try:
                    await asyncio.shield(self._send(process, {"id": episode, "kill": True}))
                except ForkServerError:
                    pass
            raise
        finally:
            self._started.pop(episode, None)
            self._exited.pop(episode, None)
            self._sent_to.pop(episode, None)

    async def close(self) -> None:
        """Stop the server (it kills every episode's group when its stdin closes)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._reader is not None:
            self._reader.cancel()
