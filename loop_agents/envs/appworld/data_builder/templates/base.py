"""The template record and unit tests shared by many templates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loop_agents.envs.appworld.data_builder.spec import TaskContent, UnitTest
from loop_agents.envs.appworld.data_builder.task_writer import World

# How an instruction words a date ("April 26, 2023"); the scripted demonstrations copy it in these words too.
INSTRUCTION_DATE_FORMAT = "%B %-d, %Y"


@dataclass(frozen=True)
class Template:
    """A scenario family. `populate(world, variant)` creates rows and returns the task content."""

    name: str
    apps: tuple[str, ...]  # apps the task needs (besides supervisor)
    difficulty: int  # AppWorld difficulty 1-3
    challenge: bool  # True: only used for test_challenge scenarios (held-out families)
    populate: Callable[[World, int], TaskContent]


def login_code(*apps: str) -> str:
    """Solution prelude: fetch passwords and log in to `apps`, leaving `<app>_token` variables."""
    lines = [
        'passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}',
        "email = apis.supervisor.show_profile()['email']",
    ]
    for app in apps:
        lines.append(
            f"{app}_token = apis.{app}.login(username=email, password=passwords[{app!r}])['access_token']"
        )
    return "\n".join(lines)


ANSWER_TEST = UnitTest("assert answers match.", "test.answer(predicted_answer, ground_truth_answer)")
NO_ANSWER_TEST = UnitTest(
    "assert no answer was given (the task only asks for changes).",
    "test.case(predicted_answer, '==', None)",
    label="no_op_pass",
)
NO_CHANGE_TEST = UnitTest(
    "assert no app data was added, updated or removed.",
    "test.case(models.changed_model_names(ignore=private_data['login_models']), '==', set())",
    label="no_op_pass",
)


def only_changed_test(allowed: list[str]) -> UnitTest:
    """No collateral change: every changed model is one of `allowed`."""
    return UnitTest(
        f"assert no models other than {', '.join(allowed)} changed.",
        f"changed = models.changed_model_names(ignore=private_data['login_models'])\n"
        f"test.case(changed - set({allowed!r}), '==', set())",
        label="no_op_pass",
    )
