"""Scenarios across two apps: notes to Todoist tasks (d3), collect debts listed in a note (d3)."""

from __future__ import annotations

from loop_agents.envs.appworld.data_builder.spec import TaskContent, UnitTest
from loop_agents.envs.appworld.data_builder.task_writer import World
from loop_agents.envs.appworld.data_builder.templates.base import (
    NO_ANSWER_TEST,
    Template,
    login_code,
    only_changed_test,
)
from loop_agents.envs.appworld.data_builder.templates.notes import _add_notes
from loop_agents.envs.appworld.data_builder.templates.todoist import _add_projects
from loop_agents.envs.appworld.data_builder.templates.venmo import add_friends


def notes_to_tasks(world: World, variant: int) -> TaskContent:
    notes = _add_notes(world, 6 + variant)
    projects = _add_projects(world, 2, 3)
    tag = world.rng.choice([tag for note in notes for tag in note.tags])
    titles = sorted(note.title for note in notes if tag in note.tags)
    project = world.rng.choice(list(projects))
    project_id = projects[project][0].project_id
    solution = login_code("simple_note", "todoist") + (
        f"\nnotes = apis.simple_note.search_notes(access_token=simple_note_token, tags=[{tag!r}], page_limit=20)\n"
        "projects = apis.todoist.show_projects(access_token=todoist_token, page_limit=20)\n"
        f"project_id = [p for p in projects if p['name'] == {project!r}][0]['project_id']\n"
        "for n in notes:\n"
        f"    if {tag!r} in n['tags']:\n"
        "        apis.todoist.create_task(project_id=project_id, title=n['title'], access_token=todoist_token)\n"
        "apis.supervisor.complete_task()"
    )
    right_titles = UnitTest(
        "assert the added tasks are titled exactly like the tagged notes.",
        "added, _, _ = models.changed_records('todoist.Task')\n"
        "test.case(sorted(list_of(added, 'title')), '==', private_data['titles'])",
    )
    right_project = UnitTest(
        "assert all added tasks are in the requested project.",
        "added, _, _ = models.changed_records('todoist.Task')\n"
        "test.case(list_of(added, 'project_id'), 'all ==', private_data['project_id'])",
    )
    return TaskContent(
        instruction=(
            f"For every Simple Note note of mine tagged '{tag}', add a task with the same title to my "
            f"Todoist project '{project}'."
        ),
        answer=None,
        tests=[NO_ANSWER_TEST, right_titles, right_project, only_changed_test(["todoist.Task"])],
        solution=solution,
        public_data={"tag": tag, "project": project},
        private_data={"titles": titles, "project_id": project_id},
    )


def request_debts(world: World, variant: int) -> TaskContent:
    rng = world.rng
    friends = add_friends(world, 4)
    debtors = rng.sample(friends, 2 + variant % 2)
    amounts = {f.email: round(rng.randint(500, 6000) / 100, 2) for f in debtors}
    lines = [f"{f.full_name}: ${amounts[f.email]:.2f}" for f in debtors]
    world.models.simple_note.Note.create_save(
        user_id=world.user_id("simple_note", world.supervisor),
        title="Money owed to me",
        content="\n".join(lines),
        tags=["finance"],
    )
    _add_notes(world, 3)
    label = rng.choice(["Trip costs", "Shared dinner", "Concert tickets"])
    private = {
        "receiver_ids": sorted(world.user_id("venmo", f) for f in debtors),
        "amount_by_receiver": {str(world.user_id("venmo", f)): amounts[f.email] for f in debtors},
    }
    solution = login_code("simple_note", "venmo") + (
        "\nnote = apis.simple_note.search_notes(access_token=simple_note_token, query='Money owed to me')[0]\n"
        "content = apis.simple_note.show_note(note_id=note['note_id'], access_token=simple_note_token)['content']\n"
        "friends = apis.venmo.search_friends(access_token=venmo_token, page_limit=20)\n"
        "for line in content.splitlines():\n"
        "    name, amount = line.split(': $')\n"
        "    friend = [f for f in friends if f['first_name'] + ' ' + f['last_name'] == name][0]\n"
        "    apis.venmo.create_payment_request(user_email=friend['email'], amount=float(amount), "
        f"description={label!r}, access_token=venmo_token)\n"
        "apis.supervisor.complete_task()"
    )
    right_people = UnitTest(
        "assert one payment request was added for each person in the note.",
        "added, _, _ = models.changed_records('venmo.PaymentRequest')\n"
        "test.case(sorted(list_of(added, 'receiver_id')), '==', private_data['receiver_ids'])",
    )
    right_amounts = UnitTest(
        "assert each payment request asks for the amount in the note.",
        "added, _, _ = models.changed_records('venmo.PaymentRequest')\n"
        "test.case(len(added), '>', 0)\n"
        "for request in added:\n"
        "    test.case(round(request.amount, 2), '==', private_data['amount_by_receiver'].get(str(request.receiver_id)))",
    )
    right_description = UnitTest(
        "assert every payment request has the requested description.",
        "added, _, _ = models.changed_records('venmo.PaymentRequest')\n"
        "test.case(list_of(added, 'description'), 'all ==', public_data['description'], normalize_text=True)",
    )
    return TaskContent(
        instruction=(
            "My Simple Note note 'Money owed to me' lists friends who owe me money. Send each of them "
            f"a Venmo payment request for the amount listed, with the description '{label}'."
        ),
        answer=None,
        tests=[
            NO_ANSWER_TEST,
            right_people,
            right_amounts,
            right_description,
            only_changed_test(["venmo.PaymentRequest", "venmo.Notification"]),
        ],
        solution=solution,
        public_data={"description": label},
        private_data=private,
    )


CROSS_APP_TEMPLATES = (
    Template("notes_to_todoist_tasks", ("simple_note", "todoist"), 3, False, notes_to_tasks),
    Template("venmo_request_debts_from_note", ("simple_note", "venmo"), 3, True, request_debts),
)
