"""Scoring outside the episode: a fork E of the clean host runs AppWorld's own evaluator over the saved
outputs, sandboxed, after refusing outputs that hold anything but row changes an API call can make (saved_changes.py).

E is forked when the episode starts (`PreparedEvaluation`), not when it ends: while the policy's cells run,
E sandboxes itself and loads the task, its start databases and its ground truth (it never runs policy
code, and the episode cannot reach it: other namespaces, Landlock, seccomp); after the episode is killed,
one message makes it check the outputs and run `evaluate_task`, AppWorld's unchanged function. Measured
before: the fork, sandbox and cold task load after the episode were most of the isolation overhead.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import traceback
from typing import Any

from loop_agents.envs.appworld.host import provenance
from loop_agents.envs.appworld.host.common import MESSAGE_LIMIT, Settings, close_fds_except, now, sandbox_self
from loop_agents.envs.appworld.host.saved_changes import SavedChangesCheck
from loop_agents.sandbox import framing, layers


class PreparedEvaluation:
    """The host's handle on E: started with the episode, asked once for the score, then gone."""

    def __init__(self, task_id: str, experiment: str, settings: Settings) -> None:
        self.settings = settings
        self.channel, child_channel = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            self.channel.close()
            layers.die_with_parent()
            try:
                close_fds_except({child_channel.fileno()})
                _evaluator_main(child_channel, task_id, experiment, settings)
            except BaseException:  # noqa: BLE001 - reported to the host
                try:
                    framing.send(child_channel, {"error": traceback.format_exc()[-3000:]})
                except OSError:
                    pass
            os._exit(0)
        child_channel.close()

    def result(self) -> dict[str, Any]:
        """Score the outputs as they are now (the episode must be over): `{"output": report}` or `{"error"}`."""
        try:
            framing.send(self.channel, {"op": "evaluate"})
            return framing.receive(
                self.channel, MESSAGE_LIMIT, time.monotonic() + self.settings.evaluate_timeout_s
            )
        except (framing.ChannelError, OSError) as error:
            return {"error": f"evaluator failed: {error}"}
        finally:
            self.close()

    def close(self) -> None:
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = 0
            self.channel.close()


def _evaluator_main(channel: socket.socket, task_id: str, experiment: str, settings: Settings) -> None:
    from appworld.apps.api_lib import set_local_date_and_time
    from appworld.evaluator import evaluate_task
    from appworld.task import Task

    out_dir = settings.output_dir(experiment, task_id)
    (out_dir / "evaluation").mkdir(parents=True, exist_ok=True)
    if "namespaces" in settings.active:
        layers.enter_namespaces()
    layers.reopen_files_read_only([out_dir / "evaluation"])
    sandbox_s = sandbox_self(settings, [settings.root / "data", out_dir], [out_dir / "evaluation"])
    began = now()
    task = Task.load(task_id=task_id)  # warms what evaluate_task loads again: files, start databases, tests
    # evaluate_task freezes the clock at the task's time; freezegun patches every loaded module only for the first
    # freeze of a process (most of evaluate_task's time in a fork), so E freezes it now at the same time and
    # evaluate_task's own freeze nests inside this one (it never ends: E exits after scoring)
    set_local_date_and_time(task.datetime)
    _ = task.model_collection
    task.ground_truth.evaluation_module()
    check = SavedChangesCheck(settings.root, task_id)
    check.prepare([*task.allowed_apps, "admin", "supervisor"])
    prepare_s = now() - began
    request = framing.receive(channel, MESSAGE_LIMIT)  # blocks until the episode is over
    if request.get("op") != "evaluate":
        return
    problem = check.problem(out_dir / "dbs")
    check.close()
    if problem:
        framing.send(channel, {"output": {"ended": "tampered_output", "message": problem}})
        return
    began = now()
    tracker = evaluate_task(
        task_id=task_id, experiment_name=experiment, suppress_errors=True, save_report=True
    )
    timing = {"sandbox_s": sandbox_s, "prepare_s": prepare_s, "evaluate_task_s": now() - began}
    framing.send(channel, {"output": {**tracker.to_dict(), "timing": timing}})


def score_experiment(
    settings: Settings, experiment: str, task_ids: list[str], trust_unsigned: bool = False
) -> dict[str, Any]:
    """AppWorld's `evaluate_tasks` over saved outputs, sandboxed. Tasks whose outputs do not carry a valid host
    signature (provenance.py; named in "unverified", and scored anyway only if `trust_unsigned`) or hold
    anything but row changes ("tampered", checked whether signed or not) are left out."""
    from appworld.environment import AppWorld  # noqa: F401 - imports everything before the sandbox is on
    from appworld.evaluator import evaluate_tasks

    outputs = settings.root / "experiments" / "outputs" / experiment
    unverified = provenance.unverified(settings.root, outputs, task_ids)
    if "namespaces" in settings.active:
        layers.enter_namespaces()
    sandbox_self(settings, [settings.root / "data"], [outputs])
    tampered = {}
    for task_id in task_ids:
        check = SavedChangesCheck(settings.root, task_id)
        if why := check.problem(outputs / "tasks" / task_id / "dbs"):
            tampered[task_id] = why
        check.close()
    clean = [t for t in task_ids if t not in tampered and (trust_unsigned or t not in unverified)]
    result: dict[str, Any] = {"aggregate": {}, "individual": {}}
    if clean:
        result = evaluate_tasks(
            task_ids=clean,
            experiment_name=experiment,
            suppress_errors=True,
            include_details=True,
            save_reports=True,
        )
    return {**result, "tampered": tampered, "unverified": unverified}
