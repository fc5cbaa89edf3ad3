"""Scoring outside the episode: a fork E of the clean host runs AppWorld's own evaluator over the saved
outputs, sandboxed, after refusing outputs that hold anything but row changes."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import traceback
from pathlib import Path
from typing import Any

from loop_agents.envs.appworld.host.common import MESSAGE_LIMIT, Settings, close_fds_except, now, sandbox_self
from loop_agents.sandbox import framing, layers


def run_evaluation(task_id: str, experiment: str, settings: Settings) -> dict[str, Any]:
    parent_channel, child_channel = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        parent_channel.close()
        layers.die_with_parent()
        try:
            close_fds_except({child_channel.fileno()})
            report = _run_evaluator(task_id, experiment, settings)
            framing.send(child_channel, {"output": report})
        except BaseException:  # noqa: BLE001 - reported to the host
            try:
                framing.send(child_channel, {"error": traceback.format_exc()[-3000:]})
            except OSError:
                pass
        os._exit(0)
    child_channel.close()
    try:
        return framing.receive(parent_channel, MESSAGE_LIMIT, time.monotonic() + settings.evaluate_timeout_s)
    except framing.ChannelError as error:
        return {"error": f"evaluator failed: {error}"}
    finally:
        parent_channel.close()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def _run_evaluator(task_id: str, experiment: str, settings: Settings) -> dict[str, Any]:
    from appworld.evaluator import evaluate_task

    out_dir = settings.output_dir(experiment, task_id)
    (out_dir / "evaluation").mkdir(parents=True, exist_ok=True)
    if "namespaces" in settings.active:
        layers.enter_namespaces(pid=False)
    layers.reopen_files_read_only([out_dir / "evaluation"])
    sandbox_s = sandbox_self(settings, [settings.root / "data", out_dir], [out_dir / "evaluation"])
    problem = _tampered_output(out_dir / "dbs")
    if problem:
        return {"ended": "tampered_output", "message": problem}
    began = now()
    tracker = evaluate_task(
        task_id=task_id, experiment_name=experiment, suppress_errors=True, save_report=True
    )
    return {**tracker.to_dict(), "timing": {"sandbox_s": sandbox_s, "evaluate_task_s": now() - began}}


def score_experiment(settings: Settings, experiment: str, task_ids: list[str]) -> dict[str, Any]:
    """AppWorld's `evaluate_tasks` over saved outputs, sandboxed; tampered tasks are left out and named."""
    from appworld.environment import AppWorld  # noqa: F401 - imports everything before the sandbox is on
    from appworld.evaluator import evaluate_tasks

    outputs = settings.root / "experiments" / "outputs" / experiment
    if "namespaces" in settings.active:
        layers.enter_namespaces(pid=False)
    sandbox_self(settings, [settings.root / "data"], [outputs])
    tampered = {t: why for t in task_ids if (why := _tampered_output(outputs / "tasks" / t / "dbs"))}
    clean = [t for t in task_ids if t not in tampered]
    result: dict[str, Any] = {"aggregate": {}, "individual": {}}
    if clean:
        result = evaluate_tasks(
            task_ids=clean,
            experiment_name=experiment,
            suppress_errors=True,
            include_details=True,
            save_reports=True,
        )
    return {**result, "tampered": tampered}


def _tampered_output(dbs: Path) -> str:
    """A reason if the saved changes hold anything but row INSERT/UPDATE/DELETE statements.

    The evaluator replays these SQL lines; ATTACH, VACUUM INTO or PRAGMA could reach files or the
    start database, which no API call can do.
    """
    for path in sorted(dbs.glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                statement = json.loads(line)[0]
            except (ValueError, IndexError, KeyError, TypeError):
                return f"{path.name}:{number} is not a change record"
            if not isinstance(statement, str) or statement.lstrip().split(" ", 1)[0].upper() not in (
                "INSERT",
                "UPDATE",
                "DELETE",
            ):
                return f"{path.name}:{number} is not a row change: {str(statement)[:80]!r}"
            if any(word in statement.upper() for word in ("ATTACH", "PRAGMA", "VACUUM", "DETACH")):
                return f"{path.name}:{number} uses a forbidden SQL word: {statement[:80]!r}"
    return ""
