"""What the issue-43 episode design costs per episode, beside the design before it, in one run.

Two episode hosts on the same data, each spawned and warmed up on the same task: the one of this checkout
(API process + confined zygote fork per episode) and the one of an earlier commit (`--baseline`, default
bdd70d1: one sandboxed fork that held the databases and ran the cells), checked out into a temporary git
worktree. Both play the same env-only episode (reset, 3 cells each followed by task_completed, evaluate, close;
no model), alternating (baseline, current, baseline, ...) so that both see the same machine load:

    cost_i = current episode_i - baseline episode_i        reported: median and p95 over i

and the median cost as a share of a median `appworld_demo` episode (`--demo-episode-s`, default 6.6 s: the
2026-11-26 measurement of an episode with the model's generation, docs/log/performance-history.md).

    .venv/bin/python benchmarks/appworld_sandbox_cost.py --root <data root> [--episodes 20] [--baseline bdd70d1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from loop_agents.envs.appworld.config import REPO_ROOT, AppWorldConfig
from loop_agents.envs.appworld.server import host_command, host_environment
from loop_agents.envs.appworld.splits import split_task_ids
from loop_agents.ports import free_port

CELLS = ["print(apis.supervisor.show_profile())", "x = 1", "print(x + 1)"]


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


class Host:
    """One episode host (this checkout's or the baseline's script), driven over raw HTTP."""

    def __init__(self, config: AppWorldConfig, script: Path, task_id: str, label: str) -> None:
        self.label, self.task_id = label, task_id
        port = free_port("127.0.0.1")
        command = host_command(config, "--port", str(port), "--warm-up-task", task_id)
        command[1] = str(script)
        if label == "baseline":  # options the earlier host does not know
            index = command.index("--scratch-mb")
            del command[index : index + 4]
        log = open(config.root_path / f"bench_{label}.log", "w")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(command, cwd=config.root_path, env=host_environment(config),
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=180)

    async def post(self, method: str, **body):
        reply = await self.client.post(f"/{method}", json={"task_id": self.task_id, **body})
        reply.raise_for_status()
        return reply.json()["output"]

    async def wait_ready(self) -> None:
        for _ in range(1200):
            try:
                await self.client.get("/")
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.25)
        raise RuntimeError(f"the {self.label} host did not start")

    async def episode(self, n: int) -> dict[str, float]:
        began = time.monotonic()
        reset = await self.post("initialize", experiment_name=f"bench_{self.label}_{n}", timeout_seconds=20,
                                max_interactions=8)  # fmt: skip
        initialized = time.monotonic()
        for cell in CELLS:
            await self.post("execute", code=cell)
            await self.post("task_completed")
        evaluating = time.monotonic()
        report = await self.post("evaluate")
        evaluated = time.monotonic()
        await self.post("close")
        if "num_tests" not in report:
            raise RuntimeError(f"{self.label} episode {n} was not scored: {report}")
        return {"episode_s": time.monotonic() - began, "reset_s": initialized - began,
                "evaluate_s": evaluated - evaluating, "num_passed": len(report["passes"]),
                **{f"host_{k}": v for k, v in reset.get("timing", {}).items() if isinstance(v, float)}}  # fmt: skip

    async def stop(self) -> None:
        await self.client.aclose()
        self.process.kill()
        self.process.wait()


def medians(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = set.intersection(*(set(row) for row in rows))
    return {key: round(statistics.median(row[key] for row in rows), 4) for key in sorted(keys)}


async def measure(episodes: int, root: str, baseline: str, demo_episode_s: float) -> dict:
    config = AppWorldConfig(root=root)
    task_id = split_task_ids(config.root_path, "train")[0]
    worktree = Path(tempfile.mkdtemp(prefix="baseline_")) / "repo"
    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(worktree), baseline],
                   check=True, capture_output=True)  # fmt: skip
    script = Path("loop_agents/envs/appworld/episode_host.py")
    hosts = [
        Host(config, worktree / script, task_id, "baseline"),
        Host(config, REPO_ROOT / script, task_id, "current"),
    ]
    rows: dict[str, list] = {"baseline": [], "current": []}
    try:
        for host in hosts:
            await host.wait_ready()
            await host.episode(-1)  # the first episode of a host pays one-time costs of both designs
        for n in range(episodes):
            for host in hosts:
                rows[host.label].append(await host.episode(n))
    finally:
        for host in hosts:
            await host.stop()
        subprocess.run(
            ["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(worktree)], check=False
        )
    cost = [c["episode_s"] - b["episode_s"] for b, c in zip(rows["baseline"], rows["current"], strict=True)]
    same_scores = all(
        b["num_passed"] == c["num_passed"] for b, c in zip(rows["baseline"], rows["current"], strict=True)
    )
    return {
        "episodes": episodes,
        "baseline_commit": baseline,
        "cost_s_median": round(statistics.median(cost), 3),
        "cost_s_p95": round(p95(cost), 3),
        "baseline_episode_s": {"median": round(statistics.median(r["episode_s"] for r in rows["baseline"]), 3),
                               "p95": round(p95([r["episode_s"] for r in rows["baseline"]]), 3)},
        "current_episode_s": {"median": round(statistics.median(r["episode_s"] for r in rows["current"]), 3),
                              "p95": round(p95([r["episode_s"] for r in rows["current"]]), 3)},
        "share_of_demo_episode": round(statistics.median(cost) / demo_episode_s, 4),
        "demo_episode_s": demo_episode_s,
        "same_scores": same_scores,
        "baseline_parts_median_s": medians(rows["baseline"]),
        "current_parts_median_s": medians(rows["current"]),
    }  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--root", default="")
    parser.add_argument("--baseline", default="bdd70d1")
    parser.add_argument("--demo-episode-s", type=float, default=6.6)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    result = asyncio.run(measure(args.episodes, args.root, args.baseline, args.demo_episode_s))
    result["load_average"] = open("/proc/loadavg").read().split()[:3]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    sys.exit(0 if result["same_scores"] else 1)
