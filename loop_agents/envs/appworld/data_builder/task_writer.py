"""Writes one task directory (`data/tasks/<id>/`) in AppWorld's official layout.

The task's start state is stored in the "changes" format (`dbs/<app>.jsonl` replayed on top of
`base_dbs`), as the official data does: post-hoc `appworld evaluate` replays saved outputs on the
base DBs and would score 0 with full-copy task DBs (docs/appworld-offline.md §3).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from loop_agents.envs.appworld.data_builder.evaluation_code import render_evaluation
from loop_agents.envs.appworld.data_builder.people import Person
from loop_agents.envs.appworld.data_builder.spec import TaskContent

ACCOUNT_APPS = ("simple_note", "todoist", "venmo", "spotify")  # apps the supervisor has accounts on
# Logging in stamps User.last_logged_in, so "no collateral change" tests ignore the User models.
LOGIN_MODELS = [f"{app}.User" for app in ACCOUNT_APPS]


@dataclass
class World:
    """The task databases being populated, plus the people in them (handed to templates)."""

    models: Any  # appworld ModelCollection of all apps
    rng: random.Random
    supervisor: Person
    contacts: list[Person]
    now: datetime
    user_ids: dict[tuple[str, str], int] = field(default_factory=dict)  # (app, email) -> user id

    def user_id(self, app: str, person: Person) -> int:
        """Id of `person`'s account on `app`, creating the (verified) account on first use."""
        key = (app, person.email)
        if key not in self.user_ids:
            user = getattr(self.models, app).User.create_save(
                first_name=person.first_name,
                last_name=person.last_name,
                email=person.email,
                password=person.app_password,
                verified=True,
            )
            self.user_ids[key] = user.id
        return self.user_ids[key]


Populate = Callable[[World], TaskContent]


def _create_supervisor_rows(world: World, instruction_placeholder: str) -> Any:
    """admin.MainUser (how evaluate finds the main user), supervisor.* rows and app accounts."""
    models, person = world.models, world.supervisor
    main_user = models.admin.MainUser.create_save(**person.supervisor_dict(), birthday="1990-04-12")
    supervisor = models.supervisor.Supervisor.create_save(**person.supervisor_dict(), birthday="1990-04-12")
    for app in ACCOUNT_APPS:
        world.user_id(app, person)
        models.admin.AccountPassword.create_save(
            main_user_id=main_user.id, account_name=app, password=person.app_password
        )
        models.supervisor.AccountPassword.create_save(
            supervisor_id=supervisor.id, account_name=app, password=person.app_password
        )
    return models.supervisor.Task.create_save(
        supervisor_id=supervisor.id, instruction=instruction_placeholder
    )


def write_task(
    data_dir: Path,
    task_id: str,
    populate: Populate,
    rng: random.Random,
    supervisor: Person,
    contacts: list[Person],
    now: datetime,
    difficulty: int,
    num_apps: int,
) -> TaskContent:
    """Creates the task's rows with AppWorld's models and writes specs, dbs and ground truth."""
    from appworld.apps import get_all_apps
    from appworld.apps.api_lib import set_local_date_and_time, unset_local_date_and_time
    from appworld.collections.models import ModelCollection
    from appworld.common.constants import CANARY_STRING, DB_VERSION

    task_dir = data_dir / "tasks" / task_id
    all_apps = get_all_apps()
    freezer = set_local_date_and_time(now)  # created_at etc. must match the world clock
    try:
        models = ModelCollection.load(
            to_db_home_path=f":memory:loop_agents_task_{task_id}",
            from_db_home_path=str(data_dir / "base_dbs"),
            load_apps=all_apps,
        )
        models.restart_db_tracker()
        world = World(models=models, rng=rng, supervisor=supervisor, contacts=contacts, now=now)
        task_row = _create_supervisor_rows(world, "pending")
        content = populate(world)
        content.private_data.setdefault("login_models", LOGIN_MODELS)
        task_row.instruction = content.instruction
        task_row.save()
        models.save(
            db_home_path=str(task_dir / "dbs"),
            format="changes",
            app_names=all_apps,
            delete_if_exists=True,
            save_model_hashes=True,
        )
        models.close()
    finally:
        unset_local_date_and_time(freezer)

    specs = {
        "instruction": content.instruction,
        "supervisor": supervisor.supervisor_dict(),
        "datetime": now.isoformat(),
        "db_version": DB_VERSION,
        "canary_string": CANARY_STRING,
    }
    _write_json(task_dir / "specs.json", specs)
    truth = task_dir / "ground_truth"
    metadata = {
        "difficulty": difficulty,
        "mode": "minimal",
        "num_apps": num_apps,
        "num_apis": content.num_api_calls,
        "num_api_calls": content.num_api_calls,
        "num_solution_code_lines": len(content.solution.strip().splitlines()),
    }
    _write_json(truth / "metadata.json", metadata)
    _write_json(truth / "public_data.json", content.public_data)
    _write_json(truth / "private_data.json", content.private_data)
    _write_json(truth / "answer.json", content.answer)
    _write_json(
        truth / "test_data.json",
        [{"requirement": unit.requirement, "label": unit.label} for unit in content.tests],
    )
    (truth / "evaluation.py").write_text(render_evaluation(content.tests, CANARY_STRING))
    (truth / "solution.py").write_text(content.solution.strip() + "\n")
    return content


def _write_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
