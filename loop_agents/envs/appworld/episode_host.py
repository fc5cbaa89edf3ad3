"""AppWorld episode host: a pre-imported parent that never runs policy code, one sandboxed fork per episode.

Run by the AppWorld venv's python as a file (never imported by the trainer):

    python episode_host.py --port P --root R [--sandbox strict|available|off] [--probe]

It speaks the env-server HTTP subset the trainer uses (`GET /`, `POST /initialize`, `/execute`,
`/task_completed`, `/evaluate`, `/close`, `/close_all`; replies `{"output": ...}`) on 127.0.0.1.

    /initialize  fork A -> A enters new user/net/pid/ipc namespaces and forks B (pid 1 there);
                 B opens the world WITHOUT ground truth, then sandboxes itself (Landlock, seccomp,
                 rlimits) and serves cells over a socketpair
    /execute     one cell in B, under AppWorld's own SIGALRM timeout and the host's hard deadline
                 (cell timeout + grace); a cell that overruns it, kills B, or sends garbage ends the
                 episode: `{"ended": "timeout" | "env_killed" | "output_too_large", ...}`
    /evaluate    B is killed first (its output DBs are final), then a fresh fork E of this clean host
                 runs AppWorld's own `evaluate_task` over the saved outputs, itself sandboxed
                 (read data and outputs, write only the evaluation folder, no network)
    /close       B (and with it every process of its pid namespace) is SIGKILLed

The host itself never loads a task's ground truth and never executes a cell.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import socket
import stat
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

_REPO = str(Path(__file__).resolve().parents[3])
sys.path.insert(0, _REPO)
from loop_agents.sandbox import framing, layers  # noqa: E402

sys.path.remove(_REPO)  # later imports (the policy's included) never see the checkout

_MESSAGE_LIMIT = 64 * 1024 * 1024
_INIT_KEYS = (
    "max_interactions",
    "max_api_calls_per_interaction",
    "timeout_seconds",
    "raise_on_unsafe_syntax",
)


def _now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # freezegun does not patch this one


class Settings:
    def __init__(self, args: argparse.Namespace, active: list[str]) -> None:
        self.root = Path(args.root).resolve()
        self.active = active
        self.limits = layers.Limits(args.memory_mb, args.file_size_mb, args.cpu_s, args.open_files)
        self.max_output_bytes = args.max_output_bytes
        self.grace_s = args.grace_s
        self.evaluate_timeout_s = args.evaluate_timeout_s
        self.initialize_timeout_s = args.initialize_timeout_s

    def output_dir(self, experiment: str, task_id: str) -> Path:
        return self.root / "experiments" / "outputs" / experiment / "tasks" / task_id


def _close_fds_except(keep: set[int]) -> None:
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


def _sandbox_self(settings: Settings, read: list[Path], write: list[Path]) -> float:
    """Applies the active in-process layers to the caller; returns the seconds it took."""
    began = _now()
    if "landlock" in settings.active:
        own_code = [Path(__file__).resolve(), Path(layers.__file__).resolve().parent]  # for tracebacks
        layers.apply_landlock(layers.system_read_paths() + own_code + read, [Path("/dev/null"), *write])
    if "rlimits" in settings.active:
        layers.apply_rlimits(settings.limits)
    if "seccomp" in settings.active:
        layers.apply_seccomp()
    return _now() - began


# ---- the episode child B (pid 1 of its namespaces) -------------------------------------------------
def _episode_main(channel: socket.socket, request: dict[str, Any], settings: Settings) -> None:
    from appworld.environment import AppWorld

    task_id, experiment = request["task_id"], request["experiment_name"]
    began = _now()
    kwargs = {key: request[key] for key in _INIT_KEYS if key in request}
    world = AppWorld(task_id=task_id, experiment_name=experiment, load_ground_truth=False, **kwargs)
    init_s = _now() - began
    out_dir = settings.output_dir(experiment, task_id)
    task_dir = settings.root / "data" / "tasks" / task_id
    public = [settings.root / "data" / "base_dbs", settings.root / "data" / "api_docs"]
    layers.reopen_files_read_only([out_dir])
    sandbox_s = _sandbox_self(settings, [*public, task_dir / "specs.json", task_dir / "dbs"], [out_dir])
    os.chdir(out_dir)
    task = world.task
    framing.send(
        channel,
        {
            "output": {
                "task_id": task_id,
                "instruction": task.instruction,
                "supervisor": dict(task.supervisor),
                "datetime": task.datetime.isoformat(),
                "timing": {"init_s": init_s, "sandbox_s": sandbox_s},
            }
        },
    )
    while True:
        message = framing.receive(channel, _MESSAGE_LIMIT)
        if message["op"] == "execute":
            framing.send(channel, {"output": world.execute(message["code"])})
        elif message["op"] == "task_completed":
            framing.send(channel, {"output": bool(world.task_completed())})


def _episode_outer(
    channel: socket.socket, pid_pipe: int, request: dict[str, Any], settings: Settings
) -> None:
    """Child A: enters the namespaces, forks B, reports B's pid, waits for it."""
    layers.die_with_parent()
    _close_fds_except({channel.fileno(), pid_pipe})
    if "namespaces" in settings.active:
        layers.enter_namespaces(pid=True)
    inner = os.fork()
    if inner == 0:
        os.close(pid_pipe)
        layers.die_with_parent()
        os.setsid()  # else kill(0, sig) would reach the host through the shared process group
        try:
            _episode_main(channel, request, settings)
        except BaseException:  # noqa: BLE001 - reported to the host, which answers the trainer
            try:
                framing.send(channel, {"error": traceback.format_exc()[-3000:]})
            except OSError:
                pass
        os._exit(1)
    os.write(pid_pipe, str(inner).encode())
    os.close(pid_pipe)
    channel.close()
    _, status = os.waitpid(inner, 0)
    os._exit(0)


class Episode:
    """The host's handle on one running episode (B and its namespace)."""

    def __init__(self, request: dict[str, Any], settings: Settings) -> None:
        self.settings = settings
        self.task_id = request["task_id"]
        self.experiment = request["experiment_name"]
        self.cell_timeout_s = float(request.get("timeout_seconds") or 20)
        self.ended: str | None = None
        self.evaluation: dict[str, Any] | None = None
        self.channel, child_channel = socket.socketpair()
        read_end, write_end = os.pipe()
        began = _now()
        self.outer = os.fork()
        if self.outer == 0:
            os.close(read_end)
            self.channel.close()
            try:
                _episode_outer(child_channel, write_end, request, settings)
            finally:
                os._exit(1)
        child_channel.close()
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            text = pipe.read().decode() or "0"
        self.inner = int(text)
        self.fork_s = _now() - began

    def receive(self, timeout_s: float) -> dict[str, Any]:
        return framing.receive(
            self.channel, self.settings.max_output_bytes + 4096, time.monotonic() + timeout_s
        )

    def ask(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """B's reply, or `{"ended": why}` after killing B (deadline, death, flood or garbage)."""
        if self.ended:
            return {"ended": self.ended}
        try:
            framing.send(self.channel, message)
            reply = self.receive(timeout_s)
            if not isinstance(reply, dict) or "output" not in reply:
                raise framing.ChannelError(f"unexpected reply {str(reply)[:200]!r}")
            return reply
        except framing.ChannelTimeout:
            self.ended = "timeout"
        except framing.ChannelTooLarge as error:
            self.ended = "output_too_large"
            self.kill()
            return {"ended": self.ended, "size": error.size}
        except (framing.ChannelError, OSError):
            self.ended = "env_killed"
        self.kill()
        return {"ended": self.ended}

    def kill(self) -> None:
        """SIGKILL B (the pid namespace dies with it) and A; reap A."""
        if self.outer > 0:
            # A exits only after reaping B, so once A is gone B's pid may be reused: never signal it then.
            # (the WNOHANG wait reaps an exited A, so its pid is not signalled either).
            if os.waitpid(self.outer, os.WNOHANG)[0] == 0:
                for pid in (self.inner, self.outer):
                    if pid > 0:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                os.waitpid(self.outer, 0)
        self.inner = self.outer = 0
        self.channel.close()


# ---- the evaluator child E ------------------------------------------------------------------------
def _evaluate(task_id: str, experiment: str, settings: Settings) -> dict[str, Any]:
    parent_channel, child_channel = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        parent_channel.close()
        layers.die_with_parent()
        try:
            _close_fds_except({child_channel.fileno()})
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
        return framing.receive(parent_channel, _MESSAGE_LIMIT, time.monotonic() + settings.evaluate_timeout_s)
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
    sandbox_s = _sandbox_self(settings, [settings.root / "data", out_dir], [out_dir / "evaluation"])
    problem = _tampered_output(out_dir / "dbs")
    if problem:
        return {"ended": "tampered_output", "message": problem}
    began = _now()
    tracker = evaluate_task(
        task_id=task_id, experiment_name=experiment, suppress_errors=True, save_report=True
    )
    return {**tracker.to_dict(), "timing": {"sandbox_s": sandbox_s, "evaluate_task_s": _now() - began}}


def _score_experiment(settings: Settings, experiment: str, task_ids: list[str]) -> dict[str, Any]:
    """AppWorld's `evaluate_tasks` over saved outputs, sandboxed; tampered tasks are left out and named."""
    from appworld.environment import AppWorld  # noqa: F401 - imports everything before the sandbox is on
    from appworld.evaluator import evaluate_tasks

    outputs = settings.root / "experiments" / "outputs" / experiment
    if "namespaces" in settings.active:
        layers.enter_namespaces(pid=False)
    _sandbox_self(settings, [settings.root / "data"], [outputs])
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


# ---- HTTP -----------------------------------------------------------------------------------------
class Host:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.episode: Episode | None = None

    def end_episode(self) -> None:
        if self.episode is not None:
            self.episode.kill()
            self.episode = None

    def initialize(self, body: dict[str, Any]) -> Any:
        self.end_episode()
        task_id, experiment = str(body["task_id"]), str(body["experiment_name"])
        if "/" in task_id + experiment or task_id.startswith(".") or experiment.startswith("."):
            raise ValueError("task_id and experiment_name must be plain names")
        if not (self.settings.root / "data" / "tasks" / task_id / "specs.json").is_file():
            raise ValueError(f"unknown task {task_id!r}")
        shutil.rmtree(self.settings.output_dir(experiment, task_id), ignore_errors=True)
        began = _now()
        episode = self.episode = Episode(body, self.settings)
        try:
            reply = episode.receive(self.settings.initialize_timeout_s)
        except framing.ChannelError as error:
            self.end_episode()
            raise RuntimeError(f"episode start failed: {error}") from error
        if "output" not in reply:
            self.end_episode()
            raise RuntimeError(f"episode start failed: {str(reply.get('error'))[-2000:]}")
        output = reply["output"]
        output["timing"].update(fork_s=episode.fork_s, initialize_s=_now() - began)
        return output

    def execute(self, body: dict[str, Any]) -> Any:
        episode = self._episode(body)
        reply = episode.ask(
            {"op": "execute", "code": str(body["code"])}, episode.cell_timeout_s + self.settings.grace_s
        )
        if "ended" in reply:
            return reply
        return reply["output"] if isinstance(reply["output"], str) else str(reply["output"])

    def task_completed(self, body: dict[str, Any]) -> Any:
        episode = self._episode(body)
        reply = episode.ask({"op": "task_completed"}, self.settings.grace_s + 5)
        return reply if "ended" in reply else reply["output"] is True

    def evaluate(self, body: dict[str, Any]) -> Any:
        episode = self._episode(body)
        if episode.evaluation is not None:
            return episode.evaluation
        if episode.ended:
            return {"ended": episode.ended}
        began = _now()
        episode.kill()  # the outputs are final before anyone reads them
        episode.ended = "evaluated"
        result = _evaluate(episode.task_id, episode.experiment, self.settings)
        if "error" in result:  # on outputs the policy wrote: its failure, not the host's
            print(f"[episode_host] evaluation of {episode.task_id} failed: {result['error']}", flush=True)
            episode.evaluation = {"ended": "evaluation_failed"}
            return episode.evaluation
        output = result["output"]
        output["evaluate_s"] = _now() - began
        episode.evaluation = output
        return output

    def close(self, body: dict[str, Any]) -> Any:
        self.end_episode()
        return None

    def _episode(self, body: dict[str, Any]) -> Episode:
        if self.episode is None or self.episode.task_id != body.get("task_id"):
            raise ValueError(f"no open episode for task {body.get('task_id')!r}")
        return self.episode


def _handler(host: Host) -> type[BaseHTTPRequestHandler]:
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


def _warm_up(settings: Settings, task_id: str, port: int) -> None:
    """Worlds opened, used by one fixed API cell and closed here (no ground truth, no policy code), so every
    fork starts as warm as a long-lived server; then the heap is frozen so the children's GC copies no pages."""
    from appworld.environment import AppWorld

    experiment = f"episode_host_warmup_{port}"
    for _ in range(3):  # the first world costs ~8 s, the second still ~1.5x a warm one
        world = AppWorld(task_id=task_id, experiment_name=experiment, load_ground_truth=False)
        world.execute("print(apis.supervisor.show_profile())")
        world.close()
        AppWorld.close_all()
    shutil.rmtree(settings.root / "experiments" / "outputs" / experiment, ignore_errors=True)
    import appworld.evaluator  # noqa: F401 - imported once here, not in every evaluator fork
    import pytest  # noqa: F401 - AppWorld's test.case imports it lazily (~0.3 s per evaluation otherwise)

    layers.reopen_files_read_only(
        []
    )  # SQLite's cached O_RDWR handles on the base DBs, inherited by every fork
    gc.collect()
    gc.freeze()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--root", default=".")
    parser.add_argument("--sandbox", default="available", choices=layers.MODES)
    parser.add_argument("--warm-up-task", default="")
    parser.add_argument("--memory-mb", type=int, default=4096)
    parser.add_argument("--file-size-mb", type=int, default=256)
    parser.add_argument("--cpu-s", type=int, default=600)
    parser.add_argument("--open-files", type=int, default=256)
    parser.add_argument("--max-output-bytes", type=int, default=4_000_000)
    parser.add_argument("--grace-s", type=float, default=10.0)
    parser.add_argument("--evaluate-timeout-s", type=float, default=50.0)
    parser.add_argument("--initialize-timeout-s", type=float, default=80.0)
    parser.add_argument(
        "--score-experiment", default="", help="score this experiment's saved outputs and exit"
    )
    parser.add_argument("--tasks", default="[]", help="JSON list of task ids for --score-experiment")
    parser.add_argument(
        "--probe", action="store_true", help="print the sandbox line and exit (2 if strict fails)"
    )
    args = parser.parse_args()
    try:
        active, _, line = layers.choose(args.sandbox, layers.detect())
    except layers.SandboxUnavailable as error:
        print(error, file=sys.stderr, flush=True)
        sys.exit(2)
    print(line, flush=True)
    if args.probe:
        return
    settings = Settings(args, active)
    os.chdir(settings.root)
    if args.score_experiment:
        result = _score_experiment(settings, args.score_experiment, json.loads(args.tasks))
        print("@@RESULT@@" + json.dumps(result, default=str), flush=True)
        return
    if args.warm_up_task:
        _warm_up(settings, args.warm_up_task, args.port)
    host = Host(settings)
    server = HTTPServer((args.host, args.port), _handler(host))
    server.serve_forever()


if __name__ == "__main__":
    main()
