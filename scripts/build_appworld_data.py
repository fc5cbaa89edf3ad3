"""Build the offline AppWorld data root (`<root>/data`) that the real engine runs on.

    python scripts/build_appworld_data.py [--root artifacts/appworld] [--seed 0] [--verify]

Splits (scenarios x 3 tasks; `--scenarios` takes these names): the classic `train` (160), `dev` (10), `test_normal`
(6), `test_challenge` (6), and since issue 39, planned after them so that every classic task keeps its id and bytes:
`dev_held_out` (10 more dev scenarios, appended to dev.txt with ids "x..." that sort after the classic ones: the
held-out set `eval.held_out_tasks` reports on), and the hard tier of `experiment=appworld_hard`, families with no
scripted warm start (data_builder/templates/hard.py): `train_hard` (168), `dev_hard` (14) and `dev_hard_held_out`
(14, appended to dev_hard.txt, ids "x..."). `--scenarios` sizes every part it names and leaves the others out.

Runs with any Python: when `appworld` is not importable (the main venv), it re-executes itself with
the AppWorld venv's interpreter (`.venv-appworld/bin/python`, made by scripts/install_appworld.sh),
because the builder creates the databases with AppWorld's own models (pydantic v1). Deterministic
for a seed. Users who have the official data skip this and point APPWORLD_ROOT at it instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _reexec_in_appworld_venv() -> None:
    venv_python = Path(os.environ.get("APPWORLD_PYTHON", REPO / ".venv-appworld" / "bin" / "python"))
    if not venv_python.exists():
        sys.exit(
            f"appworld is not importable and {venv_python} does not exist: run scripts/install_appworld.sh"
        )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    os.execve(str(venv_python), [str(venv_python), str(Path(__file__).resolve()), *sys.argv[1:]], env)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root", type=Path, default=REPO / "artifacts" / "appworld", help="APPWORLD_ROOT to write"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    parser.add_argument(
        "--scenarios",
        default="",
        help="scenarios per split or part, e.g. train=8,dev=2,dev_hard=5 (default: the full set)",
    )
    parser.add_argument(
        "--verify", action="store_true", help="run every solution and a no-op with the engine"
    )
    args = parser.parse_args()
    if importlib.util.find_spec("appworld") is None:
        _reexec_in_appworld_venv()
    sys.path.insert(0, str(REPO))
    from loop_agents.envs.appworld.data_builder.build import build_data_root

    sizes = None
    if args.scenarios:
        sizes = {k: int(v) for k, v in (item.split("=") for item in args.scenarios.split(","))}
    report = build_data_root(args.root.resolve(), seed=args.seed, split_sizes=sizes)
    print(
        f"[build_appworld_data] {report.num_scenarios} scenarios, {report.num_tasks} tasks "
        f"{report.tasks_per_split} in {report.seconds:.1f} s -> {report.root / 'data'}"
    )
    if args.verify:
        from loop_agents.envs.appworld.data_builder.verify import check_tasks

        task_ids = sorted(p.name for p in (report.root / "data" / "tasks").iterdir())
        bad = [c for c in check_tasks(report.root, task_ids) if not c.ok]
        for check in bad:
            print(f"[build_appworld_data] FAILED {check}", file=sys.stderr)
        if bad:
            sys.exit(1)
        print(f"[build_appworld_data] verified {len(task_ids)} tasks: solutions pass, no-ops fail")


if __name__ == "__main__":
    main()
