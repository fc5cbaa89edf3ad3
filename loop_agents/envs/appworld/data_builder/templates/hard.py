"""The hard tier (issue 39, "room for RL"): families the scripted warm start has no script for.

The warm start (`envs/appworld/demos`) is trained on the scripted families only (`ALL_TEMPLATES`' normal ones);
these families sit beside them in the same data root, in their own splits (`train_hard`, `dev_hard`), so
a policy that starts from that warm start has to learn them by RL. Each one breaks the scripts' habit in one way:

- `note_append_line_reordered` (distractor order): the append task worded with the title first, so the
  script's `line = quoted[0]` reads the title;
- `venmo_pay_friend_distractor` (distractor): another friend's name is quoted before the payee's;
- `todoist_count_open_in_project` (no script): count a project's open tasks (the scripts count by priority or
  complete a project's due tasks, never this);
- `venmo_total_sent` (no script): the money *sent to* a friend, where the script sums what was received;
- `venmo_pay_then_note_line` (new composition, longer horizon): pay a friend, then append a line to a note,
  two scripted steps of two apps the scripts never chain (6 tests, 5-6 cells);
- `venmo_pay_friend_trailing_distractor`, `todoist_complete_due_trailing_distractor` (distractor, within reach):
  a scripted task with one more sentence that quotes another friend / project after the values, so the script's
  reads are still right. Added to give RL some full successes at the start; measured, they do not: the 0.6 M
  warm model writes broken cells on any wording it was not trained on (seed 0: 0 of 96 episodes at temperature
  0.3; benchmarks/results/appworld_hard_warm_start.json).

Every family keeps the scripted families' conventions (names quoted, dates worded as in the instruction), so
the values can be read the way the warm start reads them, only not at the positions it learned.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from loop_agents.envs.appworld.data_builder.spec import TaskContent
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
from loop_agents.envs.appworld.data_builder.templates.notes import append_line
from loop_agents.envs.appworld.data_builder.templates.todoist import (
    _ALL_TASKS_CODE,
    _add_projects,
    complete_due,
)
from loop_agents.envs.appworld.data_builder.templates.venmo import NOTES, add_friends, pay_friend


def append_line_reordered(world: World, variant: int) -> TaskContent:
    content = append_line(world, variant)
    title, line = content.public_data["title"], content.public_data["line"]
    return replace(
        content, instruction=f"In my Simple Note note titled '{title}', add the line '{line}' at the end."
    )


def pay_friend_distractor(world: World, variant: int) -> TaskContent:
    content = pay_friend(world, variant)
    friend, amount, note = (content.public_data[k] for k in ("friend", "amount", "note"))
    others = [f for f in world.contacts[: 3 + variant] if f.full_name != friend]
    other = world.rng.choice(others)
    return replace(
        content,
        instruction=(
            f"I already paid '{other.full_name}' back. Send ${amount:.2f} to my friend '{friend}' on Venmo "
            f"with the note '{note}'."
        ),
        public_data={**content.public_data, "distractor": other.full_name},
    )


def count_open_in_project(world: World, variant: int) -> TaskContent:
    projects = _add_projects(world, 2 + variant % 2, 4 + variant)
    name = world.rng.choice(sorted(projects))
    tasks = projects[name]
    if all(not t.is_completed for t in tasks):  # a completed task makes "count them all" a wrong answer
        tasks[0].is_completed = True
        tasks[0].save()
    if all(t.is_completed for t in tasks):
        tasks[-1].is_completed = False
        tasks[-1].save()
    answer = sum(not t.is_completed for t in tasks)
    solution = (
        login_code("todoist")
        + _ALL_TASKS_CODE
        + f"apis.supervisor.complete_task(answer=sum(not t['is_completed'] for t in tasks[{name!r}]))"
    )
    return TaskContent(
        instruction=f"How many incomplete tasks are there in my Todoist project '{name}'?",
        answer=answer,
        tests=[ANSWER_TEST, NO_CHANGE_TEST],
        solution=solution,
        public_data={"project": name},
    )


def total_sent(world: World, variant: int) -> TaskContent:
    venmo, rng = world.models.venmo, world.rng
    friends = add_friends(world, 3)
    me = world.user_id("venmo", world.supervisor)
    friend = rng.choice(friends)
    days = rng.choice([14, 21, 30])
    since = (world.now - timedelta(days=days)).date()
    made = [
        (rng.choice(friends), rng.random() < 0.5, world.now - timedelta(days=rng.randint(1, 40), hours=rng.randint(0, 12)))
        for _ in range(8 + 2 * variant)
    ]  # fmt: skip
    # at least one payment each way with the friend inside the window: "what I received" is another number
    made += [(friend, False, world.now - timedelta(days=2)), (friend, True, world.now - timedelta(days=3))]
    for other, incoming, created in made:
        venmo.Transaction.create_save(
            sender_id=world.user_id("venmo", other) if incoming else me,
            receiver_id=me if incoming else world.user_id("venmo", other),
            amount=round(rng.randint(300, 6000) / 100, 2),
            description=rng.choice(NOTES),
            created_at=created,
        )

    def total(sender: int, receiver: int) -> float:
        return round(
            sum(
                t.amount
                for t in venmo.Transaction.all()
                if t.sender_id == sender and t.receiver_id == receiver and t.created_at.date() >= since
            ),
            2,
        )

    answer = total(me, world.user_id("venmo", friend))
    if answer == total(world.user_id("venmo", friend), me):  # keep the two directions apart
        venmo.Transaction.create_save(
            sender_id=me,
            receiver_id=world.user_id("venmo", friend),
            amount=7.5,
            description=rng.choice(NOTES),
            created_at=world.now - timedelta(days=1),
        )
        answer = total(me, world.user_id("venmo", friend))
    solution = login_code("venmo") + (
        "\ntotal = 0.0\npage = 0\nwhile True:\n"
        f"    batch = apis.venmo.show_transactions(access_token=venmo_token, user_email={friend.email!r}, "
        f"min_created_at={since.isoformat()!r}, page_index=page, page_limit=20)\n"
        "    if not batch:\n        break\n"
        "    total += sum(t['amount'] for t in batch if t['sender']['email'] == email)\n"
        "    page += 1\n"
        "apis.supervisor.complete_task(answer=round(total, 2))"
    )
    return TaskContent(
        instruction=(
            f"How much money in total, in dollars, have I sent to my friend '{friend.full_name}' on Venmo since "
            f"{since.strftime(INSTRUCTION_DATE_FORMAT)} (inclusive)?"
        ),
        answer=answer,
        tests=[ANSWER_TEST, NO_CHANGE_TEST],
        solution=solution,
        public_data={"friend": friend.full_name, "since": since.isoformat()},
    )


def pay_then_note_line(world: World, variant: int) -> TaskContent:
    pay = pay_friend(world, variant)
    note = append_line(world, variant)
    public = {**pay.public_data, **note.public_data}
    friend, amount, description, line, title = (
        public[k] for k in ("friend", "amount", "note", "line", "title")
    )
    own = [
        t
        for t in (*pay.tests, *note.tests)
        if t is not NO_ANSWER_TEST and not t.requirement.startswith("assert no models other than")
    ]
    changed = only_changed_test(["venmo.Transaction", "venmo.Notification", "simple_note.Note"])
    friend_email = next(p.email for p in world.contacts if p.full_name == friend)
    solution = login_code("venmo", "simple_note") + (
        f"\napis.venmo.create_transaction(receiver_email={friend_email!r}, amount={amount}, "
        f"description={description!r}, access_token=venmo_token)\n"
        "found = apis.simple_note.search_notes(access_token=simple_note_token, "
        f"query={title!r}, page_limit=20)\n"
        f"note = [n for n in found if n['title'] == {title!r}][0]\n"
        "content = apis.simple_note.show_note(note_id=note['note_id'], access_token=simple_note_token)['content']\n"
        "apis.simple_note.update_note(note_id=note['note_id'], access_token=simple_note_token, "
        f"content=content + '\\n' + {line!r})\n"
        "apis.supervisor.complete_task()"
    )
    return TaskContent(
        instruction=(
            f"Send ${amount:.2f} to my friend '{friend}' on Venmo with the note '{description}', then add the "
            f"line '{line}' at the end of my Simple Note note titled '{title}'."
        ),
        answer=None,
        tests=[NO_ANSWER_TEST, *own, changed],
        solution=solution,
        public_data=public,
        private_data={**pay.private_data, **note.private_data},
    )


def pay_friend_trailing_distractor(world: World, variant: int) -> TaskContent:
    content = pay_friend(world, variant)
    friend, amount, note = (content.public_data[k] for k in ("friend", "amount", "note"))
    other = world.rng.choice([f for f in world.contacts[: 3 + variant] if f.full_name != friend])
    return replace(
        content,
        instruction=(
            f"Send ${amount:.2f} to my friend '{friend}' on Venmo with the note '{note}'. Do not send anything "
            f"to '{other.full_name}'."
        ),
        public_data={**content.public_data, "distractor": other.full_name},
    )


def complete_due_trailing_distractor(world: World, variant: int) -> TaskContent:
    content = complete_due(world, variant)
    name = content.public_data["project"]
    others = sorted(p.name for p in world.models.todoist.Project.all() if p.name != name)
    other = world.rng.choice(others)
    return replace(content, instruction=f"{content.instruction} Leave my project '{other}' as it is.")


HARD_TEMPLATES: tuple[Template, ...] = (
    Template("note_append_line_reordered", ("simple_note",), 1, False, append_line_reordered),
    Template("venmo_pay_friend_distractor", ("venmo",), 2, False, pay_friend_distractor),
    Template("todoist_count_open_in_project", ("todoist",), 2, False, count_open_in_project),
    Template("venmo_total_sent", ("venmo",), 2, False, total_sent),
    Template("venmo_pay_then_note_line", ("venmo", "simple_note"), 3, False, pay_then_note_line),
    Template("venmo_pay_friend_trailing_distractor", ("venmo",), 1, False, pay_friend_trailing_distractor),
    Template(
        "todoist_complete_due_trailing_distractor", ("todoist",), 2, False, complete_due_trailing_distractor
    ),
)
HARD_TEMPLATE_NAMES = frozenset(t.name for t in HARD_TEMPLATES)
