"""Deliberate mistakes in scripted solutions: a wrong API, a wrong argument, or a wrong answer.

Each noisy variant has exactly one mistake and otherwise plays the script to its end, as a careless agent
would; the engine then decides whether it really fails (a mistake that happens to pass, e.g. a wrong tag
that tags the same notes, is not kept as noise). The variants are deterministic in their seed string.
"""

from __future__ import annotations

import random
import re
from datetime import date, timedelta
from typing import Any

from loop_agents.envs.appworld.data_builder.templates.notes import TAGS, TOPICS
from loop_agents.envs.appworld.data_builder.templates.todoist import PRIORITIES, PROJECTS
from loop_agents.envs.appworld.data_builder.templates.venmo import NOTES
from loop_agents.envs.appworld.demos.scripted import script_for

NOISE_KINDS = ("wrong_api", "wrong_argument", "wrong_answer")
# A plausible API that does not exist (or does something else) for each API the scripts call.
WRONG_APIS = {
    "search_notes": "show_notes",
    "show_note": "get_note",
    "update_note": "edit_note",
    "delete_note": "remove_note",
    "show_projects": "search_projects",
    "show_tasks": "search_tasks",
    "update_task": "complete_task",
    "create_task": "add_task",
    "search_friends": "show_friend_list",
    "create_transaction": "send_money",
    "show_transactions": "show_payments",
}
_API_CALL = re.compile(r"apis\.(?!supervisor\.)(\w+)\.(\w+)\(")
_LINES = ["Call mom on Sunday", "Buy more coffee", "Renew passport", "Back up laptop"]
_NAMES = ["Aisha Abbott", "Bruno Santos", "Chen Xu", "Daria Petrov", "Greta Moreau", "Hiro Nakamura"]


def _wrong_value(slot: str, value: Any, rng: random.Random) -> Any:
    """Another value of the slot's kind (a date a few days off, another tag, another amount ...)."""
    pools = {"tag": TAGS, "priority": PRIORITIES, "project": PROJECTS, "title": TOPICS, "note": NOTES,
             "line": _LINES, "friend": _NAMES}  # fmt: skip
    if slot in ("cutoff", "since"):
        shift = rng.choice([-1, 1]) * rng.randint(3, 12)
        return (date.fromisoformat(value) + timedelta(days=shift)).isoformat()
    if slot == "amount":
        return round(value + rng.choice([-1, 1]) * rng.randint(100, 2000) / 100, 2) or 1.0
    choices = [v for v in pools[slot] if v != value]
    return rng.choice(choices)


def _with_wrong_api(cells: list[str], rng: random.Random) -> list[str] | None:
    """One app API call (not the login) of the body replaced by its wrong twin."""
    sites = [
        (i, m)
        for i, cell in enumerate(cells)
        if i > 0
        for m in _API_CALL.finditer(cell)
        if m.group(2) in WRONG_APIS
    ]
    if not sites:
        return None
    index, match = rng.choice(sites)
    cell = cells[index]
    wrong = f"apis.{match.group(1)}.{WRONG_APIS[match.group(2)]}("
    cells = list(cells)
    cells[index] = cell[: match.start()] + wrong + cell[match.end() :]
    return cells


def _with_wrong_answer(cells: list[str], asks_answer: bool, rng: random.Random) -> list[str]:
    """The final cell completes with a wrong answer: off by some for a question, any answer otherwise."""
    final = cells[-1]
    if asks_answer:
        inner = final[final.index("answer=") + len("answer=") : -1]
        final = f"apis.supervisor.complete_task(answer={inner} + {rng.randint(1, 3)})"
    else:
        final = f"apis.supervisor.complete_task(answer={rng.choice(['done', 'yes', 1])!r})"
    return [*cells[:-1], final]


def noisy_cells(
    template: str, public_data: dict[str, Any], kind: str, seed: str, read: bool = False
) -> list[str] | None:
    """The script of a task with one mistake of `kind`; None if the family has no such mistake. With `read`
    (values taken from the instruction) the wrong argument is a guessed literal in place of the read value."""
    if kind not in NOISE_KINDS:
        raise ValueError(f"noise kind must be one of {NOISE_KINDS}, got {kind!r}")
    script = script_for(template)
    rng = random.Random(f"{seed}:{template}:{kind}")
    if kind == "wrong_argument":
        slot = rng.choice(script.slots)
        wrong = {**public_data, slot: _wrong_value(slot, public_data[slot], rng)}
        return script.cells(wrong, read=read, guessed=frozenset({slot}))
    cells = script.cells(public_data, read=read)
    if kind == "wrong_api":
        return _with_wrong_api(cells, rng)
    return _with_wrong_answer(cells, script.asks_answer, rng)
