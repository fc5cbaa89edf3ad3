"""What `experiment=` of scripts/parse_and_log.py names, resolved into the runs to score (see parse_and_log.py).

An AppWorld experiment name or outputs directory (scored against the task data of `appworld_root`, linked into a
temporary root when the outputs live elsewhere), an output directory of scripts/evaluate.py (its manifest says
which), or a trajectories .jsonl; bad input is a UsageError naming what is wrong.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from loop_agents.envs.registry import family
from loop_agents.eval.cli_args import UsageError
from loop_agents.rollout.trajectory import Trajectory

MANIFEST = "evaluate_manifest.json"  # what scripts/evaluate.py writes into its out dir
# This tool is the AppWorld paper's TGC/SGC script by contract (its `appworld_root=`, `scenarios=appworld`): it scores
# through that family's object (official evaluator, scenarios, behaviour rows), never by importing its package.
SCORED_FAMILY = "appworld"


@dataclass
class RunSource:
    """One evaluation run to score: AppWorld experiment outputs, or a list of trajectories."""

    label: str  # experiment name written to the results file
    run: int
    appworld_experiment: str | None = None
    trajectories: list[Trajectory] = field(default_factory=list)


@dataclass
class Inputs:
    kind: str  # "appworld" | "trajectories"
    runs: list[RunSource]
    split: str | None
    model: str
    appworld_root: Path | None = None  # root holding data/ and experiments/outputs/<experiment>
    temp_root: Path | None = None  # a temporary root linking an outside experiment dir (removed after)
    scenarios: str = "task"


# ---------------------------------------------------------------------------------------- inputs
def _default_root(explicit: str | None) -> Path:
    return family(SCORED_FAMILY).official.default_root(explicit)


def _linked_root(data_root: Path, experiment_dir: Path) -> Path:
    """A temporary APPWORLD_ROOT: data/ -> the task data, experiments/outputs/<name> -> the outside dir."""
    temp = Path(tempfile.mkdtemp(prefix="loop_parse_and_log_"))
    (temp / "data").symlink_to(data_root / "data", target_is_directory=True)
    (temp / "experiments" / "outputs").mkdir(parents=True)
    (temp / "experiments" / "outputs" / experiment_dir.name).symlink_to(
        experiment_dir, target_is_directory=True
    )
    key = data_root / "experiments" / ".provenance_key"  # outputs signed under this root still verify
    if key.is_file():
        (temp / "experiments" / ".provenance_key").symlink_to(key)
    return temp


def remove_linked_root(temp: Path) -> None:
    """Unlink the two links first, so nothing behind them can be deleted, then remove the temp dir."""
    for link in [
        temp / "data",
        temp / "experiments" / ".provenance_key",
        *(temp / "experiments" / "outputs").glob("*"),
    ]:
        if link.is_symlink():
            link.unlink()
    shutil.rmtree(temp, ignore_errors=True)


def load_trajectories(path: Path) -> list[Trajectory]:
    """A trajectories .jsonl; a line that is not a whole Trajectory (e.g. truncated) is a UsageError naming it."""
    trajectories = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            trajectories.append(Trajectory.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise UsageError(
                f"{path}:{number}: not a trajectory ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                "a truncated line is what a killed writer leaves: delete it or rerun the evaluation"
            ) from None
    return trajectories


def _trajectory_runs(trajectories: list[Trajectory], label: str) -> list[RunSource]:
    by_run: dict[int, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        by_run[traj.sample_index].append(traj)
    return [RunSource(label, run, trajectories=by_run[run]) for run in sorted(by_run)]


def _check_data(root: Path, what: str) -> None:
    if not (root / "data" / "tasks").is_dir():
        raise UsageError(
            f"{what}: no AppWorld task data under {root / 'data'}; pass appworld_root=<root with data/>"
        )


def resolve_inputs(
    spec: str,
    split: str | None,
    model: str | None,
    appworld_root: str | None,
    scenarios: str,
) -> Inputs:
    """Work out what `experiment=` names (see the module docstring); UsageError if nothing matches."""
    path = Path(spec).expanduser()
    if path.is_file():
        if path.suffix != ".jsonl":
            raise UsageError(f"experiment={spec}: a file must be a trajectories .jsonl")
        trajectories = load_trajectories(path)
        if not trajectories:
            raise UsageError(f"experiment={spec}: the file holds no trajectories")
        return Inputs("trajectories", _trajectory_runs(trajectories, path.stem), split, model or "unknown",
                      scenarios=_scenario_mode(scenarios, trajectories))  # fmt: skip
    if path.is_dir() and (path / MANIFEST).is_file():
        return _evaluate_out_dir(path.resolve(), split, model, appworld_root, scenarios)
    if path.is_dir() and (path / "tasks").is_dir():
        experiment_dir = path.resolve()
        if split is None:
            raise UsageError("split= is required to score AppWorld outputs (the split whose tasks to score)")
        inferred = experiment_dir.parents[2] if len(experiment_dir.parents) > 2 else None
        if appworld_root is None and inferred is not None and experiment_dir.parent.name == "outputs" \
                and (inferred / "data" / "tasks").is_dir():  # fmt: skip
            root = inferred
        else:
            root = _default_root(appworld_root)
        _check_data(root, f"experiment={spec}")
        runs = [RunSource(experiment_dir.name, 0, appworld_experiment=experiment_dir.name)]
        if experiment_dir.parent == (root / "experiments" / "outputs").resolve():
            return Inputs("appworld", runs, split, model or "unknown", appworld_root=root)
        temp = _linked_root(root, experiment_dir)
        return Inputs("appworld", runs, split, model or "unknown", appworld_root=temp, temp_root=temp)
    if path.is_dir():
        files = sorted(path.glob("run_*.jsonl"))
        if files:
            trajectories = [t for f in files for t in load_trajectories(f)]
            return Inputs("trajectories", _trajectory_runs(trajectories, path.name), split, model or "unknown",
                          scenarios=_scenario_mode(scenarios, trajectories))  # fmt: skip
        raise UsageError(
            f"experiment={spec}: directory is neither AppWorld experiment outputs (no tasks/), an evaluate.py "
            f"output dir (no {MANIFEST}) nor a trajectories dir (no run_*.jsonl)"
        )
    if "/" in spec or spec.endswith(".jsonl"):
        raise UsageError(f"experiment={spec}: no such file or directory")
    root = _default_root(appworld_root)
    if not (root / "experiments" / "outputs" / spec / "tasks").is_dir():
        raise UsageError(
            f"experiment={spec}: no AppWorld experiment {root / 'experiments' / 'outputs' / spec} "
            "(give a name under appworld_root, an outputs dir, an evaluate.py out dir, or a .jsonl)"
        )
    _check_data(root, f"experiment={spec}")
    if split is None:
        raise UsageError("split= is required to score AppWorld outputs (the split whose tasks to score)")
    return Inputs("appworld", [RunSource(spec, 0, appworld_experiment=spec)], split, model or "unknown",
                  appworld_root=root)  # fmt: skip


def _evaluate_out_dir(
    out: Path, split: str | None, model: str | None, appworld_root: str | None, scenarios: str
) -> Inputs:
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{out / MANIFEST} cannot be read ({exc}); rerun scripts/evaluate.py into {out}"
        ) from None
    split = split or manifest.get("split")
    model = model or manifest.get("checkpoint") or "unknown"
    appworld = manifest.get("appworld")
    if appworld:
        root = Path(appworld_root).expanduser().resolve() if appworld_root else Path(appworld["root"])
        _check_data(root, f"experiment={out}")
        outputs = root / "experiments" / "outputs"
        names = [n for n in appworld.get("experiments", []) if (outputs / n / "tasks").is_dir()]
        if not names:
            raise UsageError(
                f"experiment={out}: none of its AppWorld experiments has outputs under {outputs}"
            )
        runs = [RunSource(name, run, appworld_experiment=name) for run, name in enumerate(names)]
        return Inputs("appworld", runs, split, model, appworld_root=root)
    files = sorted((out / "trajectories").glob("run_*.jsonl"))
    trajectories = [t for f in files for t in load_trajectories(f)]
    if not trajectories:
        raise UsageError(f"experiment={out}: no episodes under {out / 'trajectories'}")
    mode = scenarios if scenarios != "auto" else ("appworld" if manifest.get("env") == "appworld" else "task")
    return Inputs("trajectories", _trajectory_runs(trajectories, str(out)), split, model, scenarios=mode)


def _scenario_mode(requested: str, trajectories: list[Trajectory]) -> str:
    """`auto`: AppWorld scenarios if the episodes came from AppWorld (its evaluation details), else per task."""
    if requested != "auto":
        return requested
    return "appworld" if all("experiment_name" in t.reward_details for t in trajectories) else "task"
