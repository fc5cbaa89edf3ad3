"""Todoist scenarios: count open tasks by priority (d1), complete a project's due tasks (d2)."""

from __future__ import annotations

from datetime import timedelta

from loop_agents.envs.appworld.data_builder.spec import TaskContent, UnitTest
from loop_agents.envs.appworld.data_builder.task_writer import World
from loop_agents.envs.appworld.data_builder.templates.base import (
    ANSWER_TEST,
    INSTRUCTION_DATE_FORMAT,
    NO_ANSWER_TEST,
    NO_CHANGE_TEST,
    Template,
    login_code,
    only_changed_test,
)

PROJECTS = ["Home", "Work", "Garden", "Wedding", "Moving", "Side project", "Health", "Finances"]
TASKS = [
    "Pay rent",
    "Email landlord",
    "Book dentist",
    "Fix bike",
    "Water plants",
    "Write report",
    "Call plumber",
    "Order paint",
    "Renew insurance",
    "Plan menu",
    "Clean gutters",
    "Review budget",
    "Send invites",
    "Buy stamps",
    "Update resume",
    "Pick up parcel",
    "Prune roses",
    "Back up photos",
]
PRIORITIES = ["high", "medium", "low"]

_ALL_TASKS_CODE = (
    "\nprojects = apis.todoist.show_projects(access_token=todoist_token, page_limit=20)\n"
    "tasks = {}\n"
    "for p in projects:\n"
    "    shown = apis.todoist.show_tasks(project_id=p['project_id'], access_token=todoist_token)\n"
    "    tasks[p['name']] = shown['no_section_tasks'] + [t for s in shown['sections'] for t in s['tasks']]\n"
)


def _add_projects(world: World, num_projects: int, tasks_per_project: int) -> dict[str, list]:
    """Projects of the supervisor (with the collaborator link Todoist lists them by) and their tasks."""
    rng, todoist = world.rng, world.models.todoist
    user_id = world.user_id("todoist", world.supervisor)
    titles = iter(rng.sample(TASKS * 3, num_projects * tasks_per_project))
    projects = {}
    for name in rng.sample(PROJECTS, num_projects):
        project = todoist.Project.create_save(user_id=user_id, name=name)
        todoist.ProjectCollaboratorLink.create_save(project_id=project.id, user_id=user_id)
        projects[name] = [
            todoist.Task.create_save(
                project_id=project.id,
                user_id=user_id,
                title=next(titles),
                due_date=world.now + timedelta(days=rng.randint(-10, 14), hours=rng.randint(0, 9)),
                priority=rng.choice(PRIORITIES),
                is_completed=rng.random() < 0.3,
                order_index=index,
            )
            for index in range(tasks_per_project)
        ]
    return projects


def count_open_by_priority(world: World, variant: int) -> TaskContent:
    projects = _add_projects(world, 2 + variant % 2, 4 + variant)
    priority = world.rng.choice(PRIORITIES)
    answer = sum(t.priority == priority and not t.is_completed for tasks in projects.values() for t in tasks)
    solution = (
        login_code("todoist")
        + _ALL_TASKS_CODE
        + (
            "apis.supervisor.complete_task(answer=sum(t['priority'] == "
            f"{priority!r} and not t['is_completed'] for ts in tasks.values() for t in ts))"
        )
    )
    return TaskContent(
        instruction=(
            f"How many incomplete {priority}-priority tasks do I have across all my Todoist projects?"
        ),
        answer=answer,
        tests=[ANSWER_TEST, NO_CHANGE_TEST],
        solution=solution,
        public_data={"priority": priority},
    )


def complete_due(world: World, variant: int) -> TaskContent:
    projects = _add_projects(world, 3, 5 + variant)
    name = world.rng.choice(list(projects))
    open_tasks = [t for t in projects[name] if not t.is_completed]
    if not open_tasks:  # keep the task meaningful: reopen one
        open_tasks = [projects[name][0]]
        open_tasks[0].is_completed = False
        open_tasks[0].save()
    cutoff = world.rng.choice(open_tasks).due_date.date()
    expected = sorted(t.id for t in open_tasks if t.due_date.date() <= cutoff)
    solution = (
        login_code("todoist")
        + _ALL_TASKS_CODE
        + (
            f"for t in tasks[{name!r}]:\n"
            f"    if not t['is_completed'] and t['due_date'][:10] <= {cutoff.isoformat()!r}:\n"
            "        apis.todoist.update_task(task_id=t['task_id'], access_token=todoist_token, is_completed=True)\n"
            "apis.supervisor.complete_task()"
        )
    )
    completed_right = UnitTest(
        "assert exactly the open tasks of the project due on or before the date were updated.",
        "_, updated, _ = models.changed_records('todoist.Task')\n"
        "test.case(sorted(list_of(updated, 'id')), '==', private_data['completed_ids'])",
    )
    all_completed = UnitTest(
        "assert every updated task is now completed.",
        "_, updated, _ = models.changed_records('todoist.Task')\n"
        "test.case(list_of(updated, 'is_completed'), 'all ==', True)",
    )
    no_add_remove = UnitTest(
        "assert no tasks were added or removed.",
        "added, _, removed = models.changed_records('todoist.Task')\n"
        "test.case(len(added) + len(removed), '==', 0)",
        label="no_op_pass",
    )
    return TaskContent(
        instruction=(
            f"Mark every incomplete task in my Todoist project '{name}' that is due on or before "
            f"{cutoff.strftime(INSTRUCTION_DATE_FORMAT)} as completed."
        ),
        answer=None,
        tests=[
            NO_ANSWER_TEST,
            completed_right,
            all_completed,
            no_add_remove,
            only_changed_test(["todoist.Task"]),
        ],
        solution=solution,
        public_data={"project": name, "cutoff": cutoff.isoformat()},
        private_data={"completed_ids": expected},
    )


TODOIST_TEMPLATES = (
    Template("todoist_count_open_priority", ("todoist",), 1, False, count_open_by_priority),
    Template("todoist_complete_due", ("todoist",), 2, False, complete_due),
)
