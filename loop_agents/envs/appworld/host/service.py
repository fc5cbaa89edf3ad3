"""The host's HTTP endpoints (one episode at a time, single-threaded) and its warm-up."""

from __future__ import annotations

import gc
import json
import shutil
import socket
import traceback
from http.server import BaseHTTPRequestHandler
from typing import Any

from loop_agents.envs.appworld.host import provenance
from loop_agents.envs.appworld.host.common import Settings, now
from loop_agents.envs.appworld.host.episode import Episode
from loop_agents.envs.appworld.host.evaluation import PreparedEvaluation
from loop_agents.sandbox import layers


class Host:
    def __init__(self, settings: Settings, zygote_client: socket.socket) -> None:
        self.settings = settings
        self.zygote_client = zygote_client
        self.key = provenance.ensure_key(settings.root)  # read here, after the zygote was forked without it
        self.episode: Episode | None = None
        self.evaluator: PreparedEvaluation | None = None  # the episode's evaluator, warm while it runs

    def end_episode(self) -> None:
        if self.episode is not None:
            self.episode.kill()
            self.episode = None
        if self.evaluator is not None:
            self.evaluator.close()
            self.evaluator = None

    def initialize(self, body: dict[str, Any]) -> Any:
        self.end_episode()
        task_id, experiment = str(body["task_id"]), str(body["experiment_name"])
        if "/" in task_id + experiment or task_id.startswith(".") or experiment.startswith("."):
            raise ValueError("task_id and experiment_name must be plain names")
        if not (self.settings.root / "data" / "tasks" / task_id / "specs.json").is_file():
            raise ValueError(f"unknown task {task_id!r}")
        shutil.rmtree(self.settings.output_dir(experiment, task_id), ignore_errors=True)
        began = now()
        episode = self.episode = Episode(body, self.settings, self.zygote_client)
        reply = episode.start(self.settings.initialize_timeout_s)
        if "output" not in reply:
            self.end_episode()
            raise RuntimeError(f"episode start failed: {reply['error']}")
        output = reply["output"]
        output["timing"].update(fork_s=episode.fork_s, initialize_s=now() - began)
        # started after the API process has set up the episode's output folder: the evaluator's Landlock rules
        # are bound to that folder, so it must exist and stay the same folder from here on
        self.evaluator = PreparedEvaluation(task_id, experiment, self.settings)
        return output

    def execute(self, body: dict[str, Any]) -> Any:
        """One cell: the API process serves the policy's calls only between `cell_begin` and `cell_end`, while
        B runs (B is stopped, or dead, when `cell_end` drops what it left on the channel)."""
        episode = self._episode(body)
        if episode.ended:
            return {"ended": episode.ended}
        light_s = self.settings.grace_s + 5
        episode.ask_api({"op": "cell_begin"}, light_s)
        reply = episode.ask_policy(
            {"op": "execute", "code": str(body["code"])}, episode.cell_timeout_s + self.settings.grace_s
        )
        verdict = episode.ask_api({"op": "cell_end"}, light_s)["output"]["verdict"]
        if "ended" in reply:
            return reply
        if verdict:  # a budget the API process holds, or the channel the policy closed: the policy's doing
            episode.ended = verdict
            episode.kill_policy()
            return {"ended": verdict, "state_cap_mb": self.settings.state_cap_bytes / 2**20}
        return reply["output"] if isinstance(reply["output"], str) else str(reply["output"])

    def task_completed(self, body: dict[str, Any]) -> Any:
        episode = self._episode(body)
        if episode.ended:
            return {"ended": episode.ended}
        return episode.ask_api({"op": "task_completed"}, self.settings.grace_s + 5)["output"] is True

    def evaluate(self, body: dict[str, Any]) -> Any:
        """The end state the API process holds, saved, signed and scored, however the episode ended: a policy
        that ended its own episode (`episode_ended` names how) is scored on what its calls did until then."""
        episode = self._episode(body)
        if episode.evaluation is not None:
            return episode.evaluation
        began = now()
        ended_by_policy = episode.ended
        episode.kill_policy()  # no cell runs while the end state is saved and scored
        saved = episode.ask_api({"op": "save"}, self.settings.evaluate_timeout_s)["output"]
        episode.kill()
        episode.ended = ended_by_policy or "evaluated"
        out_dir = self.settings.output_dir(episode.experiment, episode.task_id)
        provenance.sign(self.key, out_dir, episode.task_id, episode.experiment)
        evaluator, self.evaluator = self.evaluator, None
        result = evaluator.result() if evaluator is not None else {"error": "no evaluator was started"}
        if "error" in result:  # on the state the policy's calls made: its failure, not the host's
            print(f"[episode_host] evaluation of {episode.task_id} failed: {result['error']}", flush=True)
            episode.evaluation = {"ended": "evaluation_failed"}
            return episode.evaluation
        output = result["output"]
        output["evaluate_s"] = now() - began
        if ended_by_policy:
            output["episode_ended"] = ended_by_policy
        output.setdefault("timing", {}).update(saved)
        episode.evaluation = output
        return output

    def close(self, body: dict[str, Any]) -> Any:
        self.end_episode()
        return None

    def _episode(self, body: dict[str, Any]) -> Episode:
        if self.episode is None or self.episode.task_id != body.get("task_id"):
            raise ValueError(f"no open episode for task {body.get('task_id')!r}")
        return self.episode


def make_handler(host: Host) -> type[BaseHTTPRequestHandler]:
    routes = {
        "/initialize": host.initialize,
        "/execute": host.execute,
        "/task_completed": host.task_completed,
        "/evaluate": host.evaluate,
        "/close": host.close,
        "/close_all": host.close,
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path == "/":
                self._reply(200, {"output": {"layers": host.settings.active}})
            else:
                self._reply(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            route = routes.get(self.path)
            if route is None:
                self._reply(404, {"error": f"no route {self.path}"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                self._reply(200, {"output": route(body)})
            except ValueError as error:
                self._reply(400, {"error": str(error)})
            except Exception:  # noqa: BLE001 - a 5xx makes the trainer recycle this host
                self._reply(500, {"error": traceback.format_exc()[-3000:]})

    return Handler


def warm_up(settings: Settings, task_id: str, name: str) -> None:
    """Worlds opened, used by one fixed API cell and closed here (no ground truth, no policy code), so every
    fork starts as warm as a long-lived server; then the heap is frozen so the children's GC copies no pages."""
    from appworld.environment import AppWorld

    experiment = f"episode_host_warmup_{name}"
    for _ in range(3):  # the first world costs ~8 s, the second still ~1.5x a warm one
        world = AppWorld(task_id=task_id, experiment_name=experiment, load_ground_truth=False)
        world.execute("print(apis.supervisor.show_profile())")
        world.close()
        AppWorld.close_all()
    shutil.rmtree(settings.root / "experiments" / "outputs" / experiment, ignore_errors=True)
    _warm_api_docs()
    import appworld.evaluator  # noqa: F401 - imported once here, not in every evaluator fork
    import pytest  # noqa: F401 - AppWorld's test.case imports it lazily (~0.3 s per evaluation otherwise)

    layers.reopen_files_read_only(
        []
    )  # SQLite's cached O_RDWR handles on the base DBs, inherited by every fork
    gc.collect()
    gc.freeze()


def _warm_api_docs() -> None:
    """Fills AppWorld's per-app API-doc caches (public docs: FastAPI's OpenAPI schema, built ~0.1 s an app) for
    every app. The warm-up cell touched only `supervisor`, so each episode rebuilt the docs of every other app it
    called, ~15 % of an episode's CPU. The calls match the requester's own, keyword for keyword (`functools.cache`
    keys on how it is called)."""
    from appworld.apps import get_all_apps
    from appworld.requester import _get_api_name_to_doc, _get_app_api_name_to_argument_names

    for app_name in get_all_apps(skip_admin=False, skip_api_docs=False, skip_supervisor=False):
        _get_api_name_to_doc(app_name, include_private_apis=True)
        _get_app_api_name_to_argument_names(app_name, include_private_apis=False)
