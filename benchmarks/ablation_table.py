"""The ablation's table, from the raw records of `benchmarks/ablation.py` (`benchmarks/results/ablation_<preset>.json`).

Per algorithm, over its finished runs (one per seed; every seed of an algorithm from that seed's one warm model):
- IQM of (final - warm start) and of (best - warm start) on the preset's dev score, each run one score, with
  rliable's stratified-bootstrap 95 % interval (`loop_agents.eval.stats.iqm_interval`, as benchmarks/learning.py
  and benchmarks/rl_gain.py aggregate runs);
- P(LOOP > it): rliable's probability of improvement on (final - warm start), P(X > Y) + 1/2 P(X = Y) over every
  pair of a LOOP run X and a run Y of the other algorithm (Mann-Whitney), with its interval
  (`loop_agents.eval.stats.improvement_probability`);
- seconds per iteration: the mean over runs of each run's mean `time/iteration`;
- zero-advantage groups: the share of all groups, over all iterations of all runs, whose rewards were all equal;
- final within the best's interval: of the runs with held-out scores, how many ended with a held-out success at or
  above the lower end of the best checkpoint's 95 % Wilson interval (`loop_agents.eval.stats.wilson_interval`,
  one episode per held-out task): a run whose last checkpoint fell below it declined after its peak;
- runs recorded and failed (a failed run is counted, never dropped, and enters no aggregate).
`python -m benchmarks.render` writes the tables into docs/ablation.md and a pointer row per preset into the README's
learning table; the output depends on the files only.

LOOP on the demo: while the ablation has no LOOP run of its own there, LOOP's row is the recorded demo runs
(`demo_seeds.json`) of the same preset: `experiment=demo` without overrides, 2 threads (the preset's), exit 0, dev
evaluated through iteration 18, the latest run of each seed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from loop_agents.eval.stats import Interval, improvement_probability, iqm_interval, wilson_interval

ALGORITHMS = ("loop", "grpo", "rloo", "dr_grpo", "ppo_gae")  # as benchmarks/ablation.py runs them
NAMES = {"loop": "LOOP", "grpo": "GRPO", "rloo": "RLOO", "dr_grpo": "Dr. GRPO", "ppo_gae": "PPO (GAE)"}
BEGIN = "<!-- ablation:begin -->"
END = "<!-- ablation:end -->"
DEMO_ITERATIONS = 18  # the demo preset's run.iterations, which the recorded LOOP runs must have reached
DEMO_THREADS = 2
DEMO_K, DEMO_TASKS = 6, 16  # the demo preset's rollouts_per_task and tasks_per_iteration, which they ran
# (iterations, samples, overrides) of the recorded demo runs: the preset as it is
DEMO_SETTING = (DEMO_ITERATIONS, DEMO_K * DEMO_TASKS * DEMO_ITERATIONS, ())
METRIC_NAMES = {"success_rate": "success", "tgc": "TGC"}


def records(results: Path, preset: str, path: Path | None = None) -> list[dict]:
    """The runs recorded in `path` (default: `results/ablation_<preset>.json`)."""
    path = path or results / f"ablation_{preset}.json"
    return json.loads(path.read_text())["runs"] if path.is_file() else []


def recorded_demo_loop_runs(results: Path) -> list[dict]:
    """The comparable LOOP runs of `demo_seeds.json` (see the module docstring) in the ablation's record shape."""
    path = results / "demo_seeds.json"
    runs = json.loads(path.read_text())["runs"] if path.is_file() else []
    latest: dict[int, dict] = {}
    for r in runs:
        curve = r.get("dev_curve", {})
        if (r.get("overrides") or r["threads"] != DEMO_THREADS or r["exit_code"] != 0 or "0" not in curve
                or max(map(int, curve)) != DEMO_ITERATIONS):  # fmt: skip
            continue
        if r["seed"] not in latest or r["date"] > latest[r["seed"]]["date"]:
            latest[r["seed"]] = r
    out = []
    for seed, r in sorted(latest.items()):
        phases = r.get("phases_s", {})
        rl = sum(phases.get(k, 0.0) for k in ("rollout", "learn", "sync"))
        out.append({
            "algorithm": "loop", "seed": seed, "status": "ok", "metric": "success_rate", "date": r["date"],
            "warm_start": r["dev_start"], "final": r["dev_end"], "best": r["dev_best"],
            "seconds_per_iteration": round(rl / DEMO_ITERATIONS, 2) if rl else None,
            "zero_advantage_groups": None, "groups": None, "source": "demo_seeds.json",
            "iterations": DEMO_SETTING[0], "samples": DEMO_SETTING[1], "overrides": [],
            "rollouts_per_task": DEMO_K, "tasks_per_iteration": DEMO_TASKS,
        })  # fmt: skip
    return out


def setting(run: dict) -> tuple[int, int, tuple[str, ...]]:
    """What runs must share to enter one table: iterations, samples and the extra overrides."""
    return run["iterations"], run["samples"], tuple(sorted(run.get("overrides") or []))


def settings(results: Path, preset: str, path: Path | None = None) -> list[list[dict]]:
    """The preset's records, one list per setting (without extra overrides first, then most runs, longest runs).
    On the demo, LOOP's recorded demo runs join the preset's own setting while it has no LOOP run there."""
    groups: dict[tuple, list[dict]] = {}
    for run in records(results, preset, path):
        groups.setdefault(setting(run), []).append(run)
    if preset == "demo":
        own = groups.setdefault(DEMO_SETTING, [])
        if not any(r["algorithm"] == "loop" for r in own):
            groups[DEMO_SETTING] = recorded_demo_loop_runs(results) + own
    order = sorted(groups, key=lambda s: (len(s[2]) > 0, -len(groups[s]), -s[0], s))
    return [groups[s] for s in order if groups[s]] or [[]]


def preset_runs(results: Path, preset: str, path: Path | None = None) -> list[dict]:
    """The runs of the preset's main setting (the first of `settings`): the README row's."""
    return settings(results, preset, path)[0]


def summarize(runs: list[dict], algorithm: str, loop_gains: list[float] | None) -> dict:
    """One algorithm's row: runs, failures, IQM intervals, P(LOOP > it), seconds per iteration, zero-advantage share."""
    mine = [r for r in runs if r["algorithm"] == algorithm]
    ok = [r for r in mine if r["status"] == "ok"]
    row: dict = {"algorithm": algorithm, "runs": len(mine), "failed": len(mine) - len(ok),
                 "seeds": sorted({r["seed"] for r in ok})}  # fmt: skip
    if not ok:
        return row
    final = [r["final"] - r["warm_start"] for r in ok]
    best = [r["best"] - r["warm_start"] for r in ok]
    row["final_gain"], row["best_gain"] = iqm_interval(final), iqm_interval(best)
    row["final_gains"] = final
    if loop_gains and algorithm != "loop":
        row["p_loop_better"] = improvement_probability(loop_gains, final)
    seconds = [r["seconds_per_iteration"] for r in ok if r.get("seconds_per_iteration") is not None]
    row["seconds_per_iteration"] = statistics.mean(seconds) if seconds else None
    held = [r["held_out"] for r in ok if _held_out_scores(r)]
    if held:
        row["final_within_best"] = (
            sum(h["final"] >= wilson_interval(h["best"], int(h["num_tasks"])).low for h in held),
            len(held),
        )
    counted = [r for r in ok if r.get("groups")]
    row["zero_advantage_share"] = (
        sum(r["zero_advantage_groups"] for r in counted) / sum(r["groups"] for r in counted)
        if counted
        else None
    )
    return row


def _held_out_scores(run: dict) -> bool:
    held = run.get("held_out") or {}
    return (
        all(isinstance(held.get(k), int | float) for k in ("best", "final", "num_tasks"))
        and held["num_tasks"] > 0
    )


# runs (as JSON) -> rows: the README row and the docs table share one bootstrap
_ROWS: dict[str, list[dict]] = {}


def table_rows(runs: list[dict]) -> list[dict]:
    """A row per algorithm: the five of the ablation in order, then any other one recorded."""
    key = json.dumps(runs, sort_keys=True)
    if key not in _ROWS:
        _ROWS[key] = _table_rows(runs)
    return _ROWS[key]


def _table_rows(runs: list[dict]) -> list[dict]:
    algorithms = list(ALGORITHMS) + sorted({r["algorithm"] for r in runs} - set(ALGORITHMS))
    loop = summarize(runs, "loop", None)
    gains = loop.get("final_gains")
    return [loop] + [summarize(runs, a, gains) for a in algorithms[1:]]


def _runs_text(row: dict) -> str:
    text = f"{row['runs'] - row['failed']}"
    if row["failed"]:
        text += f" ({row['failed']} failed)"
    return text


def row_cells(row: dict, digits: int) -> list[str]:
    name = NAMES.get(row["algorithm"], row["algorithm"])
    if "final_gain" not in row:
        status = "not run yet" if row["runs"] == 0 else f"no finished run ({row['failed']} failed)"
        return [name, _runs_text(row), "—", status, "—", "—", "—", "—", "—"]
    p = row.get("p_loop_better")
    seconds = row["seconds_per_iteration"]
    share = row["zero_advantage_share"]
    return [
        name,
        _runs_text(row),
        ", ".join(map(str, row["seeds"])),
        row["final_gain"].text(digits, signed=True),
        row["best_gain"].text(digits, signed=True),
        "—" if p is None else p.text(2),
        "—" if seconds is None else f"{seconds:.1f}",
        "—" if share is None else f"{100 * share:.0f} %",
        "—" if "final_within_best" not in row else "{} of {}".format(*row["final_within_best"]),
    ]


HEADER = ("| Algorithm | Runs | Seeds | IQM final − warm start | IQM best − warm start | P(LOOP > it), final − warm "
          "start | s / iteration | Zero-advantage groups | Final within the best's interval (held-out) |")  # fmt: skip


def render_preset(results: Path, preset: str, path: Path | None = None) -> str:
    """A table and its note per setting of the preset (Markdown); `path`: another record file than its own."""
    return "\n\n".join(render_setting(results, preset, runs) for runs in settings(results, preset, path))


def setting_text(runs: list[dict]) -> str:
    """`18 iterations, 6 x 16 rollouts an iteration (1728 samples), no extra overrides`."""
    if not runs:
        return "no run recorded"
    iterations, samples, overrides = setting(runs[0])
    shape = next((f"{r['rollouts_per_task']} × {r['tasks_per_iteration']} rollouts an iteration, " for r in runs
                  if "rollouts_per_task" in r), "")  # fmt: skip
    extra = ", ".join(f"`{o}`" for o in overrides) if overrides else "no extra overrides"
    return f"{iterations} iterations, {shape}{samples} samples a run, {extra}"


def render_setting(results: Path, preset: str, runs: list[dict]) -> str:
    """One setting's table and its note (Markdown)."""
    metric = next((r["metric"] for r in runs if r.get("metric")), "success_rate")
    digits = 3 if metric == "tgc" else 2
    lines = [f"{setting_text(runs)[0].upper()}{setting_text(runs)[1:]}:", "", HEADER, "| --- " * 9 + "|"]
    lines += ["| " + " | ".join(row_cells(row, digits)) + " |" for row in table_rows(runs)]
    own = [r for r in runs if r.get("source") is None]
    notes = [
        f"Dev {METRIC_NAMES.get(metric, metric)} of `experiment={preset}`; 95 % stratified-bootstrap intervals "
        "over runs (rliable)."
    ]
    if own:
        notes.append(f"Ablation runs last recorded {max(r['date'] for r in own)} "
                     f"([ablation_{preset}.json](../benchmarks/results/ablation_{preset}.json)).")  # fmt: skip
        shared = {}
        for r in own:
            shared.setdefault(r["seed"], set()).add(r.get("warm_model"))
        split = sorted(seed for seed, keys in shared.items() if len(keys) > 1)
        if split:
            notes.append(
                f"**Not one warm model** for seed(s) {', '.join(map(str, split))}: compare them with care."
            )
    borrowed = [r for r in runs if r.get("source") == "demo_seeds.json"]
    if borrowed:
        notes.append(
            f"LOOP's row: the {len(borrowed)} recorded demo runs comparable with the ablation's "
            "([demo_seeds.json](../benchmarks/results/demo_seeds.json): `experiment=demo` without overrides, "
            f"{DEMO_THREADS} threads, exit 0, evaluated through iteration {DEMO_ITERATIONS}, the latest of each "
            f"seed, {min(r['date'] for r in borrowed)[:10]} to {max(r['date'] for r in borrowed)[:10]}): the same "
            "preset, samples and warm-start settings, but each run built its own warm model at its own commit, not "
            "the ablation's cached one; their seconds per iteration are rollout + learn + sync over 18 iterations "
            "from their phase totals, and their metrics rows were not kept (no zero-advantage share)."
        )
    return "\n".join(lines) + "\n\n" + " ".join(notes)


def presets(results: Path) -> list[str]:
    """The demo first (always: LOOP's recorded runs), then every preset with an ablation file."""
    found = sorted(p.stem[len("ablation_") :] for p in results.glob("ablation_*.json"))
    return ["demo"] + [p for p in found if p != "demo"]


def render_docs_block(results: Path) -> str:
    parts = [BEGIN, "<!-- written by `python -m benchmarks.render` from benchmarks/results/ablation_<preset>.json "
             "and demo_seeds.json; do not edit -->"]  # fmt: skip
    for preset in presets(results):
        parts += ["", f"### `{preset}`", "", render_preset(results, preset)]
    parts.append(END)
    return "\n".join(parts)


def readme_rows(results: Path) -> list[tuple[str, str, str, str]]:
    """A pointer row per preset (`presets`) for the README's learning table."""
    return [readme_row(results, preset) for preset in presets(results)]


def readme_row(results: Path, preset: str) -> tuple[str, str, str, str]:
    """The README's pointer row: each algorithm's IQM final − warm start (or 'not run yet'); the table is in docs."""
    runs = preset_runs(results, preset)
    metric = next((r["metric"] for r in runs if r.get("metric")), "success_rate")
    digits = 3 if metric == "tgc" else 2
    parts = []
    for row in table_rows(runs):
        name = NAMES.get(row["algorithm"], row["algorithm"])
        if "final_gain" in row:
            gain: Interval = row["final_gain"]
            finished = row["runs"] - row["failed"]
            parts.append(
                f"{name} {gain.text(digits, signed=True)} ({finished} run{'s' if finished != 1 else ''})"
            )
        else:
            parts.append(f"{name} {'not run yet' if row['runs'] == 0 else 'no finished run'}")
    raw = f"ablation_{preset}.json" if (results / f"ablation_{preset}.json").is_file() else "demo_seeds.json"
    dates = [r["date"] for r in runs if r.get("date")]
    return (
        f"`{preset}` ablation: each algorithm from the same warm start per seed, same samples; IQM of final − warm "
        f"start dev {METRIC_NAMES.get(metric, metric)} ([table, P(LOOP > it), time, zero-advantage groups](docs/ablation.md))",
        "; ".join(parts),
        max(dates)[:10] if dates else "—",
        raw,
    )
