"""The run's front page: curves, one row per iteration and per evaluation, the config."""

from __future__ import annotations

from typing import Any

from loop_agents.view.charts import line_chart
from loop_agents.view.family import Family, run_family
from loop_agents.view.html import esc, fmt, page, table
from loop_agents.view.metric_names import metric_name
from loop_agents.view.run_dir import EpisodeFile, RunFiles


def render_index_page(files: RunFiles, summaries: dict[str, dict[str, Any]]) -> str:
    """`summaries` maps each EpisodeFile.page_name to its `episode_file_summary`; the labels and columns are the
    run's environment family's (view/family.py)."""
    family = run_family(files.config_text)
    body = f'<p class="family">environment: {esc(family.name)}</p>' + _charts(files, summaries, family)
    if files.rollouts:
        body += "<h2>Training iterations</h2>" + _rollout_table(files.rollouts, summaries, family)
    if files.evals:
        body += "<h2>Evaluations</h2>" + _eval_table(files.evals, summaries, family)
    if files.metrics:
        body += (
            "<details><summary>all logged metrics (metrics.jsonl)</summary>"
            + _metrics_table(files.metrics)
            + "</details>"
        )
    if files.config_text is not None:
        body += f"<details><summary>config.yaml</summary><pre>{esc(files.config_text)}</pre></details>"
    return page(f"run {files.run_dir.name}", body)


def _charts(files: RunFiles, summaries: dict[str, dict[str, Any]], family: Family) -> str:
    charts = []
    for key in family.charted:
        points = [
            (r["iteration"], r[key])
            for r in files.metrics
            if isinstance(r.get(key), int | float) and "iteration" in r
        ]
        charts.append(line_chart(metric_name(key), points))
    for label, key in family.behaviour_columns[2:]:
        points = [
            (f.iteration, summaries[f.page_name][key])
            for f in files.rollouts
            if key in summaries.get(f.page_name, {})
        ]
        if len(points) > 1:
            charts.append(line_chart(f"rollouts: {label}", points))
    for split in sorted({f.split for f in files.evals}) if family.goal_completion else ():
        for key in ("tgc", "sgc"):
            points = [(f.iteration, summaries[f.page_name][key]) for f in files.evals
                      if f.split == split and key in summaries.get(f.page_name, {})]  # fmt: skip
            charts.append(line_chart(f"eval {split}: {key.upper()}", points))
    shown = [c for c in charts if c]
    return f'<div class="charts">{"".join(shown)}</div>' if shown else ""


def _behaviour_cells(summary: dict[str, Any], family: Family) -> list[str]:
    return [esc(fmt(summary.get(key))) for _, key in family.behaviour_columns]


def _rollout_table(rollouts: list[EpisodeFile], summaries: dict[str, dict[str, Any]], family: Family) -> str:
    rows = []
    for f in rollouts:
        s = summaries.get(f.page_name, {})
        rows.append(
            [f'<a href="{f.page_name}/index.html">{f.iteration}</a>', esc(fmt(s.get("episodes"))), esc(fmt(s.get("groups"))),
             esc(fmt(s.get("reward_mean"))), esc(fmt(s.get("success_rate"))), esc(fmt(s.get("dropped_fraction"))),
             *_behaviour_cells(s, family)]
        )  # fmt: skip
    headers = ["iteration", "episodes", "groups", "reward", "success", "dropped by |A|"]
    return table(headers + [label for label, _ in family.behaviour_columns], rows)


def _eval_table(evals: list[EpisodeFile], summaries: dict[str, dict[str, Any]], family: Family) -> str:
    """One row per evaluation: TGC/SGC (and per difficulty) for AppWorld, success for the other families."""
    goal = family.goal_completion
    levels = (
        sorted({k for f in evals for k in summaries.get(f.page_name, {}) if k.startswith("tgc_")})
        if goal
        else []
    )
    rows = []
    for f in evals:
        s = summaries.get(f.page_name, {})
        scores = (
            [esc(fmt(s.get("tgc"))), esc(fmt(s.get("sgc")))] if goal else [esc(fmt(s.get("success_rate")))]
        )
        per_level = [esc(f"{fmt(s.get(k))} / {fmt(s.get('s' + k[1:]))}") for k in levels]
        rows.append(
            [esc(f.split), f'<a href="{f.page_name}/index.html">{f.iteration}</a>', esc(fmt(s.get("episodes"))),
             esc(fmt(s.get("eval_runs"))), *scores, *per_level, esc(fmt(s.get("reward_mean"))),
             *_behaviour_cells(s, family)]
        )  # fmt: skip
    headers = ["split", "iteration", "episodes", "runs", *(["TGC", "SGC"] if goal else ["success"])]
    headers += [f"TGC/SGC d{k.removeprefix('tgc_')}" for k in levels] + ["reward"]
    return table(headers + [label for label, _ in family.behaviour_columns], rows)


def _metrics_table(rows: list[dict[str, Any]]) -> str:
    keys = sorted({k for r in rows for k, v in r.items() if k != "iteration" and isinstance(v, int | float)})
    body = [[esc(fmt(r.get("iteration")))] + [esc(fmt(r.get(k), 4)) for k in keys] for r in rows]
    return table(["iteration", *keys], body)
