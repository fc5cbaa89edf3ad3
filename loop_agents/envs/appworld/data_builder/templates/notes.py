"""Simple Note scenarios: count notes by tag (d1), append to a note (d1), delete by tag and date (d2)."""

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

TAGS = ["work", "recipes", "travel", "ideas", "fitness", "books", "finance", "garden", "music"]
TOPICS = [
    "Grocery list",
    "Meeting notes",
    "Trip to Lisbon",
    "Workout plan",
    "Reading list",
    "Budget",
    "Birthday gifts",
    "Project kickoff",
    "Tomato care",
    "Playlist ideas",
    "Pasta sauce",
    "Tax forms",
    "Conference talks",
    "Weekend hike",
    "Piano practice",
    "Book club",
    "Savings goals",
    "Seed order",
    "Team offsite",
    "Banana bread",
    "Museum visit",
    "Marathon prep",
    "Podcast list",
    "Car service",
]


def _add_notes(world: World, count: int) -> list:
    """`count` notes of the supervisor with 1-2 tags each and creation dates in the last 60 days."""
    rng, note_model = world.rng, world.models.simple_note.Note
    user_id = world.user_id("simple_note", world.supervisor)
    notes = []
    for title in rng.sample(TOPICS, count):
        created = world.now - timedelta(days=rng.randint(1, 60), hours=rng.randint(0, 23))
        notes.append(
            note_model.create_save(
                user_id=user_id,
                title=title,
                content=f"{title}: " + ", ".join(rng.sample(TOPICS, 3)).lower(),
                tags=rng.sample(TAGS, rng.randint(1, 2)),
                created_at=created,
                updated_at=created,
            )
        )
    return notes


def count_by_tag(world: World, variant: int) -> TaskContent:
    notes = _add_notes(world, 6 + 2 * variant)
    tag = world.rng.choice([tag for note in notes for tag in note.tags])
    answer = sum(tag in note.tags for note in notes)
    solution = login_code("simple_note") + (
        "\nnotes = []\npage = 0\nwhile True:\n"
        "    batch = apis.simple_note.search_notes(access_token=simple_note_token, page_index=page, page_limit=20)\n"
        "    if not batch:\n        break\n    notes.extend(batch)\n    page += 1\n"
        f"apis.supervisor.complete_task(answer=sum({tag!r} in n['tags'] for n in notes))"
    )
    return TaskContent(
        instruction=f"How many of my Simple Note notes are tagged '{tag}'?",
        answer=answer,
        tests=[ANSWER_TEST, NO_CHANGE_TEST],
        solution=solution,
        public_data={"tag": tag},
    )


def append_line(world: World, variant: int) -> TaskContent:
    notes = _add_notes(world, 5 + variant)
    target = world.rng.choice(notes)
    line = world.rng.choice(["Call mom on Sunday", "Buy more coffee", "Renew passport", "Back up laptop"])
    solution = login_code("simple_note") + (
        "\nfound = apis.simple_note.search_notes(access_token=simple_note_token, "
        f"query={target.title!r}, page_limit=20)\n"
        f"note = [n for n in found if n['title'] == {target.title!r}][0]\n"
        "content = apis.simple_note.show_note(note_id=note['note_id'], access_token=simple_note_token)['content']\n"
        "apis.simple_note.update_note(note_id=note['note_id'], access_token=simple_note_token, "
        f"content=content + '\\n' + {line!r})\n"
        "apis.supervisor.complete_task()"
    )
    check_content = UnitTest(
        "assert the target note keeps its old content and ends with the new line.",
        "note = models.end.simple_note.Note.find_one(id=private_data['note_id'])\n"
        "test.case(note.content.rstrip().endswith(public_data['line']), '==', True)\n"
        "test.case(note.content.startswith(private_data['old_content'].rstrip()), '==', True)",
    )
    only_target = UnitTest(
        "assert only the target note was updated and no notes were added or removed.",
        "added, updated, removed = models.changed_records('simple_note.Note')\n"
        "test.case(len(added) + len(removed), '==', 0)\n"
        "test.case(list_of(updated, 'id'), '==', [private_data['note_id']])",
    )
    return TaskContent(
        instruction=f"Add the line '{line}' at the end of my Simple Note note titled '{target.title}'.",
        answer=None,
        tests=[NO_ANSWER_TEST, check_content, only_target, only_changed_test(["simple_note.Note"])],
        solution=solution,
        public_data={"line": line, "title": target.title},
        private_data={"note_id": target.id, "old_content": target.content},
    )


def delete_old_tagged(world: World, variant: int) -> TaskContent:
    notes = _add_notes(world, 7 + 2 * variant)
    tag = world.rng.choice([tag for note in notes for tag in note.tags])
    pivot = world.rng.choice([note for note in notes if tag in note.tags])
    cutoff = pivot.created_at.date() + timedelta(days=1)  # at least the pivot note is deleted
    doomed = sorted(n.id for n in notes if tag in n.tags and n.created_at.date() < cutoff)
    solution = login_code("simple_note") + (
        "\nnotes = []\npage = 0\nwhile True:\n"
        "    batch = apis.simple_note.search_notes(access_token=simple_note_token, page_index=page, page_limit=20)\n"
        "    if not batch:\n        break\n    notes.extend(batch)\n    page += 1\n"
        "for n in notes:\n"
        f"    if {tag!r} in n['tags'] and n['created_at'][:10] < {cutoff.isoformat()!r}:\n"
        "        apis.simple_note.delete_note(note_id=n['note_id'], access_token=simple_note_token)\n"
        "apis.supervisor.complete_task()"
    )
    removed_right = UnitTest(
        "assert exactly the notes with the tag created before the date were removed.",
        "_, _, removed = models.changed_records('simple_note.Note')\n"
        "test.case(sorted(list_of(removed, 'id')), '==', private_data['removed_ids'])",
        label="no_op_fail" if doomed else "no_op_pass",
    )
    nothing_else = UnitTest(
        "assert no notes were added or updated.",
        "added, updated, _ = models.changed_records('simple_note.Note')\n"
        "test.case(len(added) + len(updated), '==', 0)",
        label="no_op_pass",
    )
    return TaskContent(
        instruction=(
            f"Delete all my Simple Note notes tagged '{tag}' that were created before "
            f"{cutoff.strftime(INSTRUCTION_DATE_FORMAT)}."
        ),
        answer=None,
        tests=[NO_ANSWER_TEST, removed_right, nothing_else, only_changed_test(["simple_note.Note"])],
        solution=solution,
        public_data={"tag": tag, "cutoff": cutoff.isoformat()},
        private_data={"removed_ids": doomed},
    )


NOTE_TEMPLATES = (
    Template("note_count_tag", ("simple_note",), 1, False, count_by_tag),
    Template("note_append_line", ("simple_note",), 1, False, append_line),
    Template("note_delete_tagged", ("simple_note",), 2, False, delete_old_tagged),
)
