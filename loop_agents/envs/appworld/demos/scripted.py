"""Scripted multi-turn solutions of the self-made scenario families, one code cell per turn.

Every family's cells follow one shape the tiny model can clone: name the task's values and log in (the same
login for every task of an app), fetch what the task names, act or compute, complete the task. The only
task-specific literals are the task's own values (a tag, a title, a date, an amount, a name: the template's
`public_data`), each written in the instruction too, and each written once: as an assignment at the top of the
first cell, right below the instruction it is copied from; the later cells use the variable. (When the values
were written where they are used, in the second or third cell, the 0.6 M warm model never learned to pick them
from the instruction, 100-400 tokens back: teacher-forced, the first token of a held-out value was right 6 times
in 22, its prior's guess; issue 19.) `Script.slots` lists them: the noise module's wrong arguments replace one.
Cells print only short outputs, so no observation is cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from loop_agents.envs.appworld.data_builder.templates.base import INSTRUCTION_DATE_FORMAT

_ALL_TASKS = (
    "tasks = []\n"
    "for p in apis.todoist.show_projects(access_token=todoist_token, page_limit=20):\n"
    "    shown = apis.todoist.show_tasks(project_id=p['project_id'], access_token=todoist_token)\n"
    "    tasks += shown['no_section_tasks'] + [t for s in shown['sections'] for t in s['tasks']]\n"
    "print(len(tasks))"
)
_PROJECT_TASKS = (
    "project = [p for p in apis.todoist.show_projects(access_token=todoist_token, page_limit=20) "
    "if p['name'] == project_name][0]\n"
    "shown = apis.todoist.show_tasks(project_id=project['project_id'], access_token=todoist_token)\n"
    "tasks = shown['no_section_tasks'] + [t for s in shown['sections'] for t in s['tasks']]\n"
    "print(len(tasks))"
)
_FRIEND = (
    "friend = [f for f in apis.venmo.search_friends(access_token=venmo_token, query=friend_name, page_limit=20) "
    "if f['first_name'] + ' ' + f['last_name'] == friend_name][0]\n"
    "print(friend['email'])"
)
_TAGGED = "notes = apis.simple_note.search_notes(access_token=simple_note_token, tags=[tag], page_limit=20)\n"


# The variable each slot's value is assigned to (`friend`, `project` and `note` name the found records).
VARIABLES = {"friend": "friend_name", "project": "project_name", "note": "description"}
# Date slots (ISO in public_data) are written as the instruction words them ('April 26, 2023') and converted to
# ISO in the cell: the policy copies the instruction's words instead of converting a date in its head (the 0.6 M
# model wrote '2023-04-22' for "April 26, 2023" with the right tag and code around it; issue 19).
DATE_SLOTS = frozenset({"cutoff", "since"})


def written_value(slot: str, value: Any) -> str:
    """How a slot's value is spelled in the first cell: `repr` of the value, dates in the instruction's words."""
    if slot in DATE_SLOTS:
        return repr(date.fromisoformat(value).strftime(INSTRUCTION_DATE_FORMAT))
    return repr(value)


def values_lines(
    slots: tuple[str, ...], values: dict[str, Any], read: dict[str, str] | None = None
) -> list[str]:
    """One line per slot in the slots' order, then date slots converted to ISO dates. A slot in `read` (slot ->
    expression) takes its value from the task's instruction (`tag = quoted[0]`), preceded by the lines that
    fetch the instruction; any other slot is written as a literal (`tag = 'travel'`)."""
    read = read or {}
    lines = [
        f"{VARIABLES.get(slot, slot)} = {read[slot] if slot in read else written_value(slot, values[slot])}"
        for slot in slots
    ]
    if read:
        uses_quoted = any(expression.startswith("quoted[") for expression in read.values())
        lines = [TASK_LINE, *([QUOTED_LINE] if uses_quoted else []), *lines]
        if any(slot in DATE_SLOTS for slot in read):
            lines.insert(0, "import re")
    dates = [slot for slot in slots if slot in DATE_SLOTS]
    if not dates:
        return lines
    # strptime has no %-d; its %d reads "3" and "26" alike
    conversions = [f"{slot} = datetime.strptime({slot}, '%B %d, %Y').strftime('%Y-%m-%d')" for slot in dates]
    return ["from datetime import datetime", *lines, *conversions]


# Reading the values from the task (`env.options.demo_values=read`): the instruction, from the real API, and
# its quoted names in order. Every self-made family quotes its names and no quoted value holds a quote.
TASK_LINE = "task = apis.supervisor.show_active_task()['instruction']"
QUOTED_LINE = 'quoted = task.split("\'")[1::2]'
# How an unquoted slot is read: a date as worded ("April 26, 2023"), a dollar amount, a priority word.
UNQUOTED_READS = {
    **{slot: "re.search(r'[A-Z][a-z]+ [0-9]+, [0-9]{4}', task).group()" for slot in DATE_SLOTS},
    "amount": "float(task.split('$')[1].split()[0])",
    "priority": "task.split('-priority')[0].split()[-1]",
}


def login_cell(*apps: str) -> str:
    """The login of every script: passwords, the supervisor's email, one `<app>_token` per app."""
    lines = [
        "passwords = {p['account_name']: p['password'] for p in apis.supervisor.show_account_passwords()}",
        "email = apis.supervisor.show_profile()['email']",
    ]
    lines += [
        f"{app}_token = apis.{app}.login(username=email, password=passwords[{app!r}])['access_token']"
        for app in apps
    ]
    return "\n".join(lines)


COMPLETE = "apis.supervisor.complete_task()"


@dataclass(frozen=True)
class Script:
    """A family's solution: `cells(slots)` from the task's values; `answer_cell` marks a question task."""

    apps: tuple[str, ...]
    slots: tuple[str, ...]  # public_data keys the cells use
    body: tuple[str, ...]  # the cells after the first; they use the values through their variables
    asks_answer: bool
    quoted: tuple[str, ...] = ()  # the slots the instruction quotes, in its order

    def reads(self) -> dict[str, str]:
        """slot -> the expression that reads its value from the instruction (`quoted[1]`, a date's regex)."""
        return {
            slot: f"quoted[{self.quoted.index(slot)}]" if slot in self.quoted else UNQUOTED_READS[slot]
            for slot in self.slots
        }

    def cells(
        self, values: dict[str, Any], read: bool = False, guessed: frozenset[str] = frozenset()
    ) -> list[str]:
        """The task's values named (as literals, or with `read` taken from the instruction except the `guessed`
        slots, written as literals), the login, then the body's cells."""
        reads = {s: e for s, e in self.reads().items() if s not in guessed} if read else None
        first = "\n".join([*values_lines(self.slots, values, reads), login_cell(*self.apps)])
        return [first, *self.body]


SCRIPTS: dict[str, Script] = {
    "note_count_tag": Script(("simple_note",), ("tag",), (
        _TAGGED + "print(len(notes))",
        "apis.supervisor.complete_task(answer=len(notes))",
    ), asks_answer=True, quoted=("tag",)),
    "note_append_line": Script(("simple_note",), ("title", "line"), (
        "note = [n for n in apis.simple_note.search_notes(access_token=simple_note_token, query=title, "
        "page_limit=20) if n['title'] == title][0]\n"
        "content = apis.simple_note.show_note(note_id=note['note_id'], access_token=simple_note_token)['content']\n"
        "print(content)",
        "apis.simple_note.update_note(note_id=note['note_id'], access_token=simple_note_token, "
        "content=content + '\\n' + line)",
        COMPLETE,
    ), asks_answer=False, quoted=("line", "title")),
    "note_delete_tagged": Script(("simple_note",), ("tag", "cutoff"), (
        _TAGGED + "print([n['created_at'][:10] for n in notes])",
        "for n in notes:\n    if n['created_at'][:10] < cutoff:\n"
        "        apis.simple_note.delete_note(note_id=n['note_id'], access_token=simple_note_token)",
        COMPLETE,
    ), asks_answer=False, quoted=("tag",)),
    "todoist_count_open_priority": Script(("todoist",), ("priority",), (
        _ALL_TASKS,
        "apis.supervisor.complete_task(answer=sum(t['priority'] == priority and not t['is_completed'] "
        "for t in tasks))",
    ), asks_answer=True, quoted=()),
    "todoist_complete_due": Script(("todoist",), ("project", "cutoff"), (
        _PROJECT_TASKS,
        "for t in tasks:\n    if not t['is_completed'] and t['due_date'][:10] <= cutoff:\n"
        "        apis.todoist.update_task(task_id=t['task_id'], access_token=todoist_token, is_completed=True)",
        COMPLETE,
    ), asks_answer=False, quoted=("project",)),
    "venmo_pay_friend": Script(("venmo",), ("friend", "amount", "note"), (
        _FRIEND,
        "apis.venmo.create_transaction(receiver_email=friend['email'], amount=amount, "
        "description=description, access_token=venmo_token)",
        COMPLETE,
    ), asks_answer=False, quoted=("friend", "note")),
    "venmo_total_received": Script(("venmo",), ("friend", "since"), (
        _FRIEND,
        "total = 0\nfor page in range(5):\n"
        "    for t in apis.venmo.show_transactions(access_token=venmo_token, user_email=friend['email'], "
        "min_created_at=since, page_index=page, page_limit=20):\n"
        "        if t['receiver']['email'] == email:\n            total += t['amount']\nprint(round(total, 2))",
        "apis.supervisor.complete_task(answer=round(total, 2))",
    ), asks_answer=True, quoted=("friend",)),
    "notes_to_todoist_tasks": Script(("simple_note", "todoist"), ("tag", "project"), (
        _TAGGED
        + "project = [p for p in apis.todoist.show_projects(access_token=todoist_token, page_limit=20) "
        "if p['name'] == project_name][0]\nprint([n['title'] for n in notes])",
        "for n in notes:\n    apis.todoist.create_task(project_id=project['project_id'], title=n['title'], "
        "access_token=todoist_token)",
        COMPLETE,
    ), asks_answer=False, quoted=("tag", "project")),
}  # fmt: skip


def script_for(template: str) -> Script:
    """The family's script; KeyError names the families that have one."""
    if template not in SCRIPTS:
        raise KeyError(f"no scripted solution for scenario family {template!r}; scripted: {sorted(SCRIPTS)}")
    return SCRIPTS[template]


def clean_cells(template: str, public_data: dict[str, Any], read: bool = False) -> list[str]:
    """The correct cells of a task of `template` with its `public_data` (ground_truth/public_data.json); with
    `read` the cells take the values from the instruction instead of writing them."""
    script = script_for(template)
    missing = [slot for slot in script.slots if slot not in public_data]
    if missing:
        raise ValueError(f"{template}: public_data lacks {missing}")
    return script.cells(public_data, read=read)
