"""AppWorld's own evaluator over an experiment's outputs: what `scripts/evaluate.py` and `parse_and_log` report as
the official TGC/SGC (the family's `official` part)."""

from __future__ import annotations

from pathlib import Path

from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.official_eval import OfficialEvaluation, run_official_evaluation
from loop_agents.envs.appworld.splits import split_task_ids
from loop_agents.envs.appworld.task_files import check_task_files


class AppWorldOfficialScores:
    """Scores named experiments under an AppWorld root (`<root>/experiments/outputs/<experiment>`)."""

    def default_root(self, explicit: str | None = None) -> Path:
        """The root a tool uses when none is given: `explicit`, $APPWORLD_ROOT, or the self-made data's."""
        return AppWorldConfig(root=explicit or "").root_path

    def score(
        self,
        experiment: str,
        split: str,
        root: str | Path,
        python: str = "",
        trust_unsigned: bool = False,
    ) -> OfficialEvaluation:
        """Every task of `split` scored by AppWorld's `evaluate_task`; every file it reads is parsed first, so a
        corrupted one is one ValueError naming the task and the file (missing outputs: FileNotFoundError)."""
        config = AppWorldConfig(root=str(root), python=python)
        check_task_files(config.root_path, split_task_ids(config.root_path, split), experiment)
        return run_official_evaluation(experiment, split, config, trust_unsigned=trust_unsigned)
