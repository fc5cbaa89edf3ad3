"""The README's learning table: one row per headline learning claim, each number computed from its raw file.

`python -m benchmarks.render` writes it between `<!-- learning:begin -->` and `<!-- learning:end -->`, and its
`--check` fails when a number there differs from what the files give, like the speed table. Aggregates over runs
are rliable's (IQM with the stratified-bootstrap interval, `loop_agents/eval/stats.py`), seeded, so the text depends
only on the files. The ablation's rows (one per preset, pointing at docs/ablation.md) come from
benchmarks/ablation_table.py, the asynchronous loop's row from benchmarks/async_table.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from benchmarks import ablation_table, async_table
from loop_agents.eval.stats import Interval, iqm_interval

BEGIN = "<!-- learning:begin -->"
END = "<!-- learning:end -->"
RESULTS = Path("benchmarks") / "results"


def _load(results: Path, name: str) -> dict:
    return json.loads((results / name).read_text())


def demo_seeds_row(name: str, label: str) -> Callable[[Path], tuple[str, str, str, str]]:
    """The row of a `scripts/demo_seeds.py` file: dev success after LOOP minus at the warm start, per run."""

    def row(results: Path) -> tuple[str, str, str, str]:
        runs = [r for r in _load(results, name)["runs"] if "gain_points" in r]
        gain = iqm_interval([r["gain_points"] for r in runs])
        held = [r["held_out"] for r in runs if "final" in r.get("held_out", {})]
        held_gain = iqm_interval([100 * (h["final"] - h["start"]) for h in held])
        return (
            f"{label}: dev success after LOOP minus at the warm start ({len(runs)} evaluated runs, seeds × threads)",
            f"IQM gain {gain.text(0, signed=True)} points; {held[0]['tasks']} held-out tasks "
            f"{held_gain.text(0, signed=True)} ({len(held)} runs)",
            max(r["date"] for r in runs)[:10],
            name,
        )

    return row


demo_row = demo_seeds_row("demo_seeds.json", "`demo`")
gateway_row = demo_seeds_row(
    "demo_gateway_seeds.json",
    "`demo` through the gateway, played by an agent program that prompts in text "
    "(`benchmarks/gateway_programs.py:text_action_loop`)",
)


def appworld_gain_row(name: str, iterations: int) -> Callable[[Path], tuple[str, str, str, str]]:
    """The row of one `benchmarks.rl_gain` record: runs of `iterations` LOOP iterations, paired per seed."""

    def row(results: Path) -> tuple[str, str, str, str]:
        record = _load(results, name)
        seeds, total = record["seeds"], record["aggregate"]
        per_seed = ", ".join(Interval.from_dict(s["final"]).text(3, signed=True) for s in seeds)
        gain = Interval.from_dict(total["iqm_gain"])
        first = seeds[0]["final"]
        return (
            f"`appworld_demo`, {iterations} iterations: the final policy minus the warm start's, paired on all "
            f"{first['tasks']} dev tasks × {seeds[0]['runs']} runs ({len(seeds)} seeds)",
            f"TGC {per_seed}; IQM {gain.text(3, signed=True)}; interval above 0 on "
            f"{total['intervals_excluding_zero']} of {len(seeds)} seeds",
            record["date"][:10],
            name,
        )

    return row


def appworld_runs_row(results: Path) -> tuple[str, str, str, str]:
    # here, not at the top: appworld_demo_runs imports benchmarks.runner, which imports render, which imports this
    from benchmarks.appworld_demo_runs import dev_scores

    runs = [r for r in _load(results, "appworld_demo_runs.json")["runs"] if r.get("iterations") == 15]
    scores = [s for r in runs if (s := dev_scores(r)) is not None]
    gain = iqm_interval([s["gain"] for s in scores])
    return (
        f"`appworld_demo`: dev TGC after the warm start minus at it ({len(scores)} runs of 15 iterations, one "
        "30-task evaluation each)",
        f"IQM {gain.text(3, signed=True)}",
        max(r.get("date", "") for r in runs)[:10],
        "appworld_demo_runs.json",
    )


def openenv_row(results: Path) -> tuple[str, str, str, str]:
    record = _load(results, "demo_openenv_run.json")
    dev = record["dev_success_by_iteration"]
    first, last = min(dev, key=int), max(dev, key=int)
    low, high = record["dev_final_interval_95"]
    held = record["held_out_400"]
    return (
        f"`demo_openenv`: LOOP through an OpenEnv server (seed {record['seed']})",
        f"dev {dev[first]:.2f} → {dev[last]:.2f} [{low:.2f}, {high:.2f}]; 400 held-out tasks {held['start']:.2f} → "
        f"{held['final_best']:.2f}",
        record["date"][:10],
        "demo_openenv_run.json",
    )


def hard_warm_start_row(results: Path) -> tuple[str, str, str, str]:
    record = _load(results, "appworld_hard_warm_start.json")["design_2_committed"]["runs"]
    seeds = sorted(key for key in record if re.fullmatch(r"seed_\d+", key))  # not the temperature variants
    values = " / ".join(f"{record[s]['tgc']['mean']:.3f}" for s in seeds)
    return (
        f"`appworld_hard`: the scripted warm start on unscripted families (all {record[seeds[0]]['tgc']['n']} "
        "dev_hard tasks)",
        f"TGC {values} (seeds {', '.join(s.split('_')[1] for s in seeds)})",
        max(record[s]["date"] for s in seeds)[:10],
        "appworld_hard_warm_start.json",
    )


def hard_loop_row(results: Path) -> tuple[str, str, str, str]:
    runs = _load(results, "appworld_hard_runs.json")["runs"]
    tgc = " / ".join(f"{max(r['dev_tgc'].values()):.3f}" for r in runs)
    credit = "; ".join(
        f"seed {r['seed']} {r['held_out']['start']['reward']:.3f} → {r['held_out']['final']['reward']:.3f}"
        for r in runs
    )
    runs_text = f"{len(runs)} run{'s' * (len(runs) > 1)} of {runs[0]['iterations']} iterations"
    return (
        f"`appworld_hard`: LOOP from that warm start ({runs_text})",
        f"dev_hard TGC at most {tgc} at any evaluation; partial credit on the {runs[0]['held_out']['final']['tasks']} "
        f"held-out tasks {credit} (one episode a task, no interval)",
        max(r["date"] for r in runs)[:10],
        "appworld_hard_runs.json",
    )


ROWS: tuple[Callable[[Path], tuple[str, str, str, str]], ...] = (
    demo_row,
    gateway_row,
    appworld_gain_row("appworld_demo_rl_gain_30it.json", 30),
    appworld_gain_row("appworld_demo_rl_gain.json", 15),
    appworld_runs_row,
    openenv_row,
    hard_warm_start_row,
    hard_loop_row,
)


def render_block(root: Path) -> str:
    results = root / RESULTS
    lines = [
        BEGIN,
        "<!-- written by `python -m benchmarks.render` from the raw files linked; do not edit -->",
        "| Claim | Value (95 % intervals) | Date | Raw |",
        "| --- | --- | --- | --- |",
    ]
    extra = ablation_table.readme_rows(results) + async_table.readme_rows(results)
    for claim, value, date, name in [row(results) for row in ROWS] + extra:
        lines.append(f"| {claim} | {value} | {date} | [{name}]({RESULTS.as_posix()}/{name}) |")
    lines.append(END)
    return "\n".join(lines)
