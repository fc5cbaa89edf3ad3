"""The asynchronous-LOOP table, from the raw records of `benchmarks/async_staleness.py`.

Per `algorithm.max_staleness`, over its finished runs (one per seed; a seed's runs share one warm model):
- samples/s of the RL loop, the mean over seeds, and "x sync": the median over seeds of (this run's samples/s /
  the synchronous run's of the same seed), paired because a seed fixes the warm model and the task draw;
- time to a dev success of 0.6 (the RL loop's seconds up to the first dev evaluation at or above it) per seed, and
  its "x sync" the same way (a seed where either run did not reach 0.6 gives no ratio; the count says how many did);
- held-out success after the same samples (the final adapter, every setting runs the same iterations): IQM over
  seeds with rliable's stratified-bootstrap 95 % interval (`loop_agents.eval.stats.iqm_interval`);
- the share of trained tokens by staleness (adapter versions behind), of mixed-version episodes, dropped groups;
- runs that failed are counted and enter no aggregate.
The goal line checks issue 52's targets on the best asynchronous setting: >= 1.5x samples/s, >= 1.3x time to 0.6, and
held-out success inside the synchronous runs' interval. `python -m benchmarks.render` writes the block into
docs/performance.md between the markers; the output depends on the file only.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from loop_agents.eval.stats import iqm_interval

NAME = "async_staleness_seeds"
BEGIN = "<!-- async:begin -->"
END = "<!-- async:end -->"
GOALS = {"samples": 1.5, "time": 1.3}


def load(results: Path) -> dict:
    """The series' record (its runs and the date it was written), or no runs when there is none yet. Read here,
    not through run_records.load_runs: the date is needed too, and run_records imports the runner, which imports
    the renderer, which imports this module."""
    path = results / f"{NAME}.json"
    return json.loads(path.read_text()) if path.is_file() else {"runs": []}


def rows_by_setting(runs: list[dict]) -> dict[int, dict]:
    """`summarize` of each max_staleness, every one against the synchronous runs of the same seeds."""
    sync = {r["seed"]: r for r in runs if r["max_staleness"] == 0 and r["exit_code"] == 0}
    settings = sorted({r["max_staleness"] for r in runs})
    return {k: summarize([r for r in runs if r["max_staleness"] == k], sync) for k in settings}


def readme_rows(results: Path) -> list[tuple[str, str, str, str]]:
    """The README learning table's row: each asynchronous setting against the synchronous loop (none without runs)."""
    record = load(results)
    rows = rows_by_setting(record["runs"])
    if 0 not in rows or rows[0]["held_out"] is None or len(rows) < 2:
        return []
    parts = []
    for k, row in rows.items():
        held = row["held_out"]
        text = f"held-out {held.text(2)}" if held else "held-out -"
        if k:
            text = (f"samples/s {_x(row['samples_ratio'])}, time to 0.6 {_x(row['time_ratio'])} "
                    f"(n={row['time_ratios_n']}), " + text)  # fmt: skip
        parts.append(f"k={k}: {text}")
    date = record["date"][:10]
    seeds = len(rows[0]["seeds"])
    claim = (f"`demo`, asynchronous (`algorithm.max_staleness=k`) on the node in miniature (`cpu_split`), x the "
             f"synchronous loop (k=0) of the same seed, median of {seeds} seeds ([table](docs/performance.md))")  # fmt: skip
    return [(claim, "; ".join(parts), date, f"{NAME}.json")]


def held_out_final(run: dict) -> float | None:
    """The final checkpoint's held-out score on the run's metric (success before runs recorded it)."""
    return (run.get("held_out") or {}).get(f"held_out/final/{run.get('metric', 'success_rate')}")


def paired_ratio(runs: list[dict], sync: dict[int, dict], key: str, higher_is_better: bool) -> list[float]:
    """Per seed with both numbers: this setting's `key` over the synchronous run's (inverted for times, so that
    above 1 is always faster)."""
    ratios = []
    for run in runs:
        base = sync.get(run["seed"], {}).get(key)
        value = run.get(key)
        if base and value:
            ratios.append(value / base if higher_is_better else base / value)
    return ratios


def staleness_shares(runs: list[dict]) -> str:
    """`a / b / c %`: the trained tokens 0, 1, 2, ... versions stale, over all runs of a setting."""
    totals: dict[int, float] = {}
    for run in runs:
        for stale, count in (run.get("staleness_tokens") or {}).items():
            totals[int(stale)] = totals.get(int(stale), 0.0) + count
    whole = sum(totals.values())
    if not whole:
        return "-"
    return " / ".join(f"{100 * totals.get(s, 0.0) / whole:.0f}" for s in range(max(totals) + 1)) + " %"


def summarize(runs: list[dict], sync: dict[int, dict]) -> dict:
    ok = [r for r in runs if r["exit_code"] == 0 and r.get("samples_per_s")]
    held = [h for h in map(held_out_final, ok) if h is not None]
    samples_ratios = paired_ratio(ok, sync, "samples_per_s", True)
    time_ratios = paired_ratio(ok, sync, "time_to_success_0.6_s", False)
    return {
        "seeds": sorted(r["seed"] for r in ok),
        "failed": len(runs) - len(ok),
        "samples_per_s": statistics.mean(r["samples_per_s"] for r in ok) if ok else None,
        "samples_ratio": statistics.median(samples_ratios) if samples_ratios else None,
        "times": [r.get("time_to_success_0.6_s") for r in sorted(ok, key=lambda r: r["seed"])],
        "time_ratio": statistics.median(time_ratios) if time_ratios else None,
        "time_ratios_n": len(time_ratios),
        "dev_final": statistics.mean(r["dev_success"][max(r["dev_success"], key=int)] for r in ok)
        if ok
        else None,
        "held_out": iqm_interval(held) if len(held) >= 2 else None,
        "staleness": staleness_shares(ok),
        "mixed": statistics.mean(r.get("mixed_version_share_mean", 0.0) for r in ok) if ok else None,
        "dropped": sum(r.get("dropped_groups", 0.0) for r in ok),
        "load": (min(r["load_before"] for r in ok), max(r["load_after"] for r in ok)) if ok else None,
    }


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _times(times: list[float | None]) -> str:
    return ", ".join(f"{t:.0f}" if t is not None else "not reached" for t in times) or "-"


def render_block(results: Path) -> str:
    runs = load(results)["runs"]
    if not runs:
        return f"{BEGIN}\nNo run recorded yet: `python -m benchmarks.async_staleness` (see above).\n{END}"
    rows = rows_by_setting(runs)
    lines = [
        BEGIN,
        f"From [`{NAME}.json`](../benchmarks/results/{NAME}.json) (`benchmarks/async_table.py`):",
        "",
        "| max_staleness | seeds (failed) | samples/s | x sync | time to 0.6 (s), per seed | x sync | dev final "
        "| held-out final, IQM [95 % CI] | tokens 0/1/2/... stale | mixed-version episodes | dropped groups "
        "| load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, row in rows.items():
        held = row["held_out"]
        lines.append(
            f"| {k} | {', '.join(map(str, row['seeds'])) or '-'} ({row['failed']}) "
            f"| {row['samples_per_s']:.2f} | {_x(row['samples_ratio'])} | {_times(row['times'])} "
            f"| {_x(row['time_ratio'])} (n={row['time_ratios_n']}) | {row['dev_final']:.2f} "
            f"| {f'{held.mean:.2f} [{held.low:.2f}, {held.high:.2f}]' if held else '-'} | {row['staleness']} "
            f"| {100 * row['mixed']:.0f} % | {row['dropped']:.0f} | {row['load'][0]:.1f}-{row['load'][1]:.1f} |"
            if row["samples_per_s"] is not None
            else f"| {k} | - ({row['failed']}) | - | - | - | - | - | - | - | - | - | - |"
        )
    lines += ["", goal_line(rows), END]
    return "\n".join(lines)


def goal_line(rows: dict[int, dict]) -> str:
    """Issue 52's targets (>= 1.5x samples/s, >= 1.3x time to 0.6, held-out success inside the synchronous runs'
    interval), checked on every asynchronous setting; which settings meet all three."""
    candidates = [(k, r) for k, r in rows.items() if k > 0 and r["samples_ratio"] is not None]
    if 0 not in rows or not candidates:
        return "Goal: not measured yet (needs a synchronous run and an asynchronous one of the same seed)."
    sync_held, parts, met = rows[0]["held_out"], [], []
    for k, row in candidates:
        held = row["held_out"]
        checks = (
            row["samples_ratio"] >= GOALS["samples"],
            row["time_ratio"] is not None and row["time_ratio"] >= GOALS["time"],
            sync_held is not None and held is not None and sync_held.low <= held.mean <= sync_held.high,
        )
        marks = ["met" if ok else "not met" for ok in checks]
        parts.append(f"max_staleness={k}: samples/s {_x(row['samples_ratio'])} ({marks[0]}), time to 0.6 "
                     f"{_x(row['time_ratio'])} ({marks[1]}), held-out {'inside' if checks[2] else 'outside'}")  # fmt: skip
        if all(checks):
            met.append(str(k))
    targets = (f"Goal (>= {GOALS['samples']}x samples/s, >= {GOALS['time']}x time to 0.6, held-out success inside "
               "the synchronous runs' interval)")  # fmt: skip
    verdict = f"met by max_staleness={', '.join(met)}" if met else "met by no setting"
    return f"{targets}: {'; '.join(parts)}: {verdict}."
