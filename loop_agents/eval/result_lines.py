"""The one-line results a person reads at the end of each evaluation and of each run (pure formatting).

- `eval_line`: `[eval iter 21] dev success 0.96 (100 tasks) | best 0.96 @21`; AppWorld shows TGC and SGC.
- `run_summary`: the held-out metric start → end (best @ iteration), wall time per phase, where the plots,
  the viewer command and the best checkpoint are.
- `evaluate_line` / `parse_and_log_line`: the final line of `scripts/evaluate.py` and `scripts/parse_and_log.py`.
Values are fractions in [0, 1], printed with 2 decimals (3 for TGC/SGC, which AppWorld reports in 0.1 %). Where the
metrics carry a 95 % interval (`eval/success_low/high`, `eval/sgc_low/high`: `task_intervals.py`), it follows the
mean in brackets: `success 0.62 [0.55, 0.70]`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from loop_agents.envs.registry import reports_goal_completion
from loop_agents.eval.stats import Interval

INTERVAL_OF = {"success_rate": "success", "tgc": "success", "sgc": "sgc"}  # TGC is the success rate


def interval(metrics: Mapping[str, Any], metric: str, digits: int = 2, prefix: str = "eval/") -> str:
    """` [0.55, 0.70]` when the metrics carry the interval of `metric` (success_rate, tgc, sgc), else ``."""
    name = INTERVAL_OF.get(metric)
    low, high = metrics.get(f"{prefix}{name}_low"), metrics.get(f"{prefix}{name}_high")
    if name is None or low is None or high is None:
        return ""
    return f" [{_num(low, digits)}, {_num(high, digits)}]"


def headline(metrics: Mapping[str, Any], env: str, prefix: str = "eval/") -> str:
    """`success 0.96 [0.92, 0.99]` (or `TGC 0.452 [...] SGC 0.301 [...]` for AppWorld) from one evaluation."""
    if reports_goal_completion(env):
        return (
            f"TGC {_num(metrics.get(prefix + 'tgc'), 3)}{interval(metrics, 'tgc', 3, prefix)} "
            f"SGC {_num(metrics.get(prefix + 'sgc'), 3)}{interval(metrics, 'sgc', 3, prefix)}"
        )
    return (
        f"success {_num(metrics.get(prefix + 'success_rate'))}{interval(metrics, 'success_rate', 2, prefix)}"
    )


def metric_label(best_metric: str) -> str:
    return {"success_rate": "success", "tgc": "TGC", "sgc": "SGC", "reward_mean": "reward"}.get(
        best_metric, best_metric
    )


def eval_line(
    iteration: int,
    split: str,
    metrics: Mapping[str, Any],
    env: str,
    best: tuple[int, float] | None,
    best_metric: str = "success_rate",
) -> str:
    """`[eval iter 21] dev success 0.96 (100 tasks) | best 0.96 @21`; `best` is (iteration, value) or None."""
    tasks = metrics.get("eval/num_tasks")
    runs = metrics.get("eval/num_runs")
    size = f"{int(tasks)} tasks" if tasks is not None else "? tasks"
    if runs is not None and runs > 1:
        size += f" x {int(runs)} runs"
    causes = lost_causes_text(metrics)
    if not metrics.get("eval/num_tasks") and metrics.get("eval/lost"):
        line = f"[eval iter {iteration}] {split}: no episode scored, {int(metrics['eval/lost'])} lost"
    else:
        line = f"[eval iter {iteration}] {split} {headline(metrics, env)} ({size})"
        if metrics.get("eval/lost"):
            line += f", {int(metrics['eval/lost'])} lost"
    line += f" ({causes})" if causes and metrics.get("eval/lost") else ""
    if best is not None:
        line += f" | best {metric_label(best_metric)} {_num(best[1], _digits(best_metric))} @{best[0]}"
    return line


def lost_causes_text(metrics: Mapping[str, Any], prefix: str = "eval/") -> str:
    """`16 env_error, 2 env_timeout` from `{prefix}lost_<cause>` ("" when no cause is recorded)."""
    causes = [(k.removeprefix(f"{prefix}lost_"), int(v)) for k, v in metrics.items()
              if k.startswith(f"{prefix}lost_") and v]  # fmt: skip
    return ", ".join(f"{n} {cause}" for cause, n in sorted(causes, key=lambda item: -item[1]))


def _digits(metric: str) -> int:
    return 3 if metric in ("tgc", "sgc") else 2


def _num(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{float(value):.{digits}f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.0f} s"


def phase_line(phases: Mapping[str, float | None]) -> str:
    """`time: warm start 948 s | start-up 31 s | ...` in the given order; None = did not run (shown as such)."""
    cells = [f"{name} {'cached' if value is None else _seconds(value)}" for name, value in phases.items()]
    return "time: " + " | ".join(cells)


def run_summary(
    run_dir: str,
    split: str,
    env: str,
    best_metric: str,
    selection: Sequence[tuple[int, Mapping[str, Any]]],
    best: tuple[int, float] | None,
    held_out: Mapping[str, Any] | None,
    phases: Mapping[str, float | None],
    plots: bool,
    lost: Sequence[tuple[int, Mapping[str, Any]]] = (),
    eval_enabled: bool = True,
) -> list[str]:
    """The run's closing lines.

    selection: (iteration, eval metrics) of every evaluation on the selection tasks, in iteration order.
    lost: (iteration, eval metrics) of the evaluations that lost every episode (no score), in iteration order.
    held_out: {"num_tasks": n, "results": [(label, iteration, metrics with eval/ keys), ...]} or None.
    """
    label = metric_label(best_metric)
    digits = _digits(best_metric)
    lines = [f"== result of {run_dir}"]
    if selection:
        (first_it, first), (last_it, last) = selection[0], selection[-1]
        n = first.get("eval/num_tasks")
        key = f"eval/{best_metric}"
        text = (
            f"{split} {label} {_num(first.get(key), digits)}{interval(first, best_metric, digits)} (iter {first_it}) → "
            f"{_num(last.get(key), digits)}{interval(last, best_metric, digits)} (iter {last_it})"
        )
        if best is not None:
            text += f", best {_num(best[1], digits)} @{best[0]}"
        if lost:
            text += f"; every episode lost at {', '.join(f'@{it}' for it, _ in lost)}"
        lines.append(f"selection ({int(n) if n is not None else '?'} {split} tasks, picks the best): {text}")
    elif lost:
        cells = ", ".join(f"@{it} ({lost_causes_text(m) or 'lost'})" for it, m in lost)
        lines.append(
            f"selection: no evaluation scored, every episode was lost: {cells}; no checkpoint picked"
        )
    elif not eval_enabled:
        lines.append("no evaluation ran (eval.enabled=false)")
    else:
        lines.append("no evaluation finished")
    if held_out and held_out.get("results"):
        cells = [f"{name} @{it}: {headline(m, env)}" for name, it, m in held_out["results"]]
        lines.append(
            f"held out ({held_out['num_tasks']} other {split} tasks, unseen by the selection): "
            + ", ".join(cells)
        )
    lines.append(phase_line(phases))
    where = []
    if plots:
        where.append(f"plots {run_dir}/plots/")
    where.append(f"viewer: python -m loop_agents.view {run_dir}")
    if best is not None:
        where.append(f"best checkpoint {run_dir}/checkpoints/best (iteration {best[0]})")
    lines.append(" | ".join(where))
    return lines


def evaluate_line(report: Mapping[str, Any]) -> str:
    """The last line of scripts/evaluate.py: what was scored, its headline numbers with their 95 % intervals over
    every saved episode (and how many are missing), pass@k, where they are."""
    metrics = report.get("metrics") or {}
    env = str(report.get("env"))
    official = report.get("official")
    total = (report.get("intervals") or {}).get("aggregate") or {}
    if "success" in total:
        text = _interval_headline(total, env)
        if total.get("runs", 1) > 1:
            text += f", pass@{total['k']} {_num(total['pass@k'])}"
    else:
        text = headline(metrics, env) if metrics else "no episodes"
    if reports_goal_completion(env) and official:
        aggregate = official["goal_completion"].get("aggregate", {})
        text += f" (official: TGC {_num(aggregate.get('tgc'), 3)} SGC {_num(aggregate.get('sgc'), 3)})"
    elif not reports_goal_completion(env) and "eval/reward_mean" in metrics:
        text += f", reward {_num(metrics['eval/reward_mean'])}"
    runs = report.get("runs", 1)
    size = f"{report.get('num_tasks')} tasks" + (f" x {runs} runs" if runs and runs > 1 else "")
    if total:
        size += f": {total['episodes']} episodes" + (
            f", {total['missing']} missing" if total["missing"] else ""
        )
    return (
        f"[evaluate] {report.get('checkpoint')} on {env}/{report.get('split')}: {text} ({size}, "
        f"{len(report.get('complete_runs', []))} complete runs) -> {report.get('out')}/metrics.json"
    )


def _interval_headline(summary: Mapping[str, Any], env: str) -> str:
    """`success 0.62 [0.55, 0.70]` or `TGC 0.452 [0.300, 0.600] SGC ...` from one `interval_summary`."""

    def cell(name: str, digits: int) -> str:
        i = summary[name]
        return f"{_num(i['mean'], digits)} [{_num(i['low'], digits)}, {_num(i['high'], digits)}]"

    if reports_goal_completion(env):
        return f"TGC {cell('success', 3)}" + (f" SGC {cell('sgc', 3)}" if "sgc" in summary else "")
    return f"success {cell('success', 2)}"


def compare_line(report: Mapping[str, Any]) -> list[str]:
    """`[compare] A - B on env/split: success +0.05 [-0.02, +0.12] (100 tasks, 300 paired episodes; A 0.62, B 0.57)`,
    then one indented line per difficulty."""
    compare = report["compare"]
    name = "TGC" if reports_goal_completion(str(report.get("env"))) else "success"
    lines = []
    for key, paired in compare.items():
        if not isinstance(paired, Mapping):
            continue
        if "difference" not in paired:
            text = "no task played by both"
        else:
            d = paired["difference"]
            text = (
                f"{name} {Interval.from_dict(d).text(3, signed=True)} ({paired['tasks']} tasks, "
                f"{paired['pairs']} paired episodes; {_num(paired['other'], 3)} vs {_num(paired['base'], 3)})"
            )
        if key == "aggregate":
            lines.insert(
                0,
                f"[compare] {report.get('checkpoint')} - {compare['checkpoint']} on {report.get('env')}/"
                f"{report.get('split')}: {text}",
            )
        else:
            lines.append(f"  {key}: {text}")
    return lines


def parse_and_log_line(
    experiment: str,
    split: str | None,
    summary: Mapping[str, Mapping[str, float]],
    runs: int,
    results_file: str,
) -> str:
    """The last line of scripts/parse_and_log.py: aggregate TGC/SGC (mean over runs) and the results file."""
    aggregate = summary.get("aggregate", {})
    spread = ""
    if runs > 1:
        spread = (
            f" (± {_num(aggregate.get('tgc_std'), 3)} / {_num(aggregate.get('sgc_std'), 3)} over {runs} runs)"
        )
    tasks = aggregate.get("num_tasks")
    return (
        f"[parse_and_log] {experiment} on {split or 'unknown'}: TGC {_num(aggregate.get('tgc'), 3)} "
        f"SGC {_num(aggregate.get('sgc'), 3)}{spread}, {int(tasks) if tasks is not None else '?'} tasks "
        f"-> {results_file}"
    )
