"""Plain-text tables of the eval scripts: TGC/SGC per difficulty (mean ± std over runs) and other metrics.

Values are fractions in [0, 1] in every file; the tables print percentages, as AppWorld does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loop_agents.envs.registry import reports_goal_completion
from loop_agents.eval.goal_completion import GoalCompletion, mean_over_runs


def summarize_runs(runs: Sequence[Mapping[str, GoalCompletion]]) -> dict[str, dict[str, float]]:
    """`mean_over_runs` plus task and scenario counts (of the first run) per key."""
    summary = mean_over_runs(runs)
    for key, values in summary.items():
        values["num_tasks"] = float(runs[0][key].num_tasks)
        values["num_scenarios"] = float(runs[0][key].num_scenarios)
    return summary


def goal_completion_table(summary: Mapping[str, Mapping[str, float]]) -> str:
    """Rows aggregate, difficulty_1.. with TGC and SGC in percent (± std over runs when > 1 run)."""
    many = any(values.get("num_runs", 1) > 1 for values in summary.values())

    def cell(values: Mapping[str, float], name: str) -> str:
        text = f"{100 * values[name]:6.1f}"
        return text + (f" ± {100 * values.get(name + '_std', 0.0):4.1f}" if many else "")

    width = 15 if many else 8
    lines = [f"{'':14}{'TGC':>{width}}{'SGC':>{width}}{'tasks':>8}{'scenarios':>11}"]
    for key in sorted(summary, key=lambda k: (k != "aggregate", k)):
        values = summary[key]
        lines.append(
            f"{key:14}{cell(values, 'tgc'):>{width}}{cell(values, 'sgc'):>{width}}"
            f"{int(values.get('num_tasks', 0)):>8}{int(values.get('num_scenarios', 0)):>11}"
        )
    return "\n".join(lines)


def interval_table(intervals: Mapping[str, Mapping[str, Any]], env: str) -> str:
    """Rows aggregate, difficulty_1..: success (TGC) and SGC with 95 % intervals in percent, avg@k, pass@k, episodes."""
    first = "TGC" if reports_goal_completion(env) else "success"
    lines = [f"{'':14}{first + ' [95 %]':>22}{'SGC [95 %]':>22}{'avg@k':>8}{'pass@k':>8}{'k':>3}{'episodes':>10}"
             f"{'missing':>9}"]  # fmt: skip
    for key in sorted(intervals, key=lambda k: (k != "aggregate", k)):
        row = intervals[key]
        cells = [
            f"{100 * row[m]['mean']:.1f} [{100 * row[m]['low']:.1f}, {100 * row[m]['high']:.1f}]"
            if m in row
            else "-"
            for m in ("success", "sgc")
        ]
        rates = [f"{100 * row[m]:.1f}" if m in row else "-" for m in ("avg@k", "pass@k")]
        lines.append(
            f"{key:14}{cells[0]:>22}{cells[1]:>22}{rates[0]:>8}{rates[1]:>8}{row.get('k', '-'):>3}"
            f"{row['episodes']:>10}{row['missing']:>9}"
        )
    return "\n".join(lines)


def metrics_lines(metrics: Mapping[str, Any], prefixes: Sequence[str], per_line: int = 4) -> str:
    """`key value` pairs of the metrics whose names start with one of `prefixes`, a few per line."""
    items = [(k, v) for k, v in metrics.items() if any(k.startswith(p) for p in prefixes)]
    cells = [f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in items]
    return "\n".join("  ".join(cells[i : i + per_line]) for i in range(0, len(cells), per_line))


def format_report(report: dict[str, Any]) -> str:
    """The evaluation's summary for the terminal: goal completion tables, metrics, timing."""
    lines = [f"== {report['checkpoint']} on {report['env']}/{report['split']}: {report['num_tasks']} tasks x "
             f"{report['runs']} runs ({len(report['complete_runs'])} complete) -> {report['out']}"]  # fmt: skip
    for run, missing in report["missing"].items():
        lines.append(
            f"run {run}: {len(missing)} tasks have no episode (lost or not played); rerun to play them"
        )
    if report["missing"]:
        complete = report["complete_runs"]
        lines.append(
            f"INCOMPLETE: the means below cover only the complete runs {complete}"
            if complete
            else "INCOMPLETE: no run is complete, so no mean is reported (metrics.json keeps `partial_metrics`)"
        )
    if report["goal_completion"]:
        lines += [
            "goal completion (from the episodes' rewards):",
            goal_completion_table(report["goal_completion"]),
        ]
    if report.get("intervals"):
        missing = report["intervals"]["aggregate"]["missing"]
        lines += [
            "95 % intervals (bootstrap over tasks; SGC over scenarios), every saved episode"
            + (f"; {missing} episodes missing" if missing else "")
            + ":",
            interval_table(report["intervals"], report["env"]),
        ]
    if report["official"]:
        lines += [
            "AppWorld's official evaluation:",
            goal_completion_table(report["official"]["goal_completion"]),
        ]
    metrics = report["metrics"]
    if metrics:
        lines.append(metrics_lines(metrics, ("eval/success_rate", "eval/reward_mean", "eval/turns_mean",
                                             "eval/tokens_mean", "eval/finish_")))  # fmt: skip
        lines.append(metrics_lines({k.removeprefix("behaviour/"): v for k, v in metrics.items()
                                    if k.startswith("behaviour/")}, ("",)))  # fmt: skip
    timing = report["timing"]
    lines.append(
        f"played {timing['episodes_played']} episodes in {timing['play_s']:.1f} s "
        f"(server start {timing['server_startup_s']:.1f} s, env start {timing['env_startup_s']:.1f} s, "
        f"lost {timing['episodes_lost']}); "
        f"total {timing['total_s']:.1f} s"
    )
    return "\n".join(lines)
