"""Venmo scenarios: pay a friend (d1), total received from a friend in a date range (d2).

The friend's name is quoted in the instruction, as the other families quote the names they give (a tag, a
project, a title): the tokenizer attaches a leading space to a word (` Elif`) but not after a quote (`'Elif`),
so an unquoted name starts with other tokens than the `friend_name = 'Elif Moreau'` a solution writes. The
0.6 M demo model put 0.01-0.03 on the name's first token there (teacher-forced, held-out tasks; issue 19).
"""

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

NOTES = ["pizza night", "concert tickets", "cab share", "groceries", "book club snacks", "gas money"]


def add_friends(world: World, count: int) -> list:
    """`count` contacts with Venmo accounts who are the supervisor's friends (both directions)."""
    venmo = world.models.venmo
    me = world.user_id("venmo", world.supervisor)
    friends = world.contacts[:count]
    for friend in friends:
        other = world.user_id("venmo", friend)
        venmo.Friendship.create_save(user_id=me, friend_id=other)
        venmo.Friendship.create_save(user_id=other, friend_id=me)
    return friends


def _set_balance(world: World, amount: float) -> None:
    user = world.models.venmo.User.find_one(id=world.user_id("venmo", world.supervisor))
    user.venmo_balance = amount
    user.save()


def pay_friend(world: World, variant: int) -> TaskContent:
    friends = add_friends(world, 3 + variant)
    _set_balance(world, 500.0)
    friend = world.rng.choice(friends)
    amount = round(world.rng.randint(500, 9000) / 100, 2)
    note = world.rng.choice(NOTES)
    solution = login_code("venmo") + (
        f"\napis.venmo.create_transaction(receiver_email={friend.email!r}, amount={amount}, "
        f"description={note!r}, access_token=venmo_token)\n"
        "apis.supervisor.complete_task()"
    )
    one_payment = UnitTest(
        "assert exactly one transaction was added, from the supervisor to the friend.",
        "added, _, removed = models.changed_records('venmo.Transaction')\n"
        "test.case(len(added), '==', 1)\n"
        "test.case(len(removed), '==', 0)\n"
        "test.case(added[0].sender_id, '==', private_data['sender_id'])\n"
        "test.case(added[0].receiver_id, '==', private_data['receiver_id'])",
    )
    right_amount = UnitTest(
        "assert the added transaction has the requested amount and note.",
        "added, _, _ = models.changed_records('venmo.Transaction')\n"
        "test.case(round(added[0].amount, 2), '==', public_data['amount'])\n"
        "test.case(added[0].description, '==', public_data['note'], normalize_text=True)",
    )
    return TaskContent(
        instruction=(
            f"Send ${amount:.2f} to my friend '{friend.full_name}' on Venmo with the note '{note}'."
        ),
        answer=None,
        tests=[
            NO_ANSWER_TEST,
            one_payment,
            right_amount,
            only_changed_test(["venmo.Transaction", "venmo.Notification"]),
        ],
        solution=solution,
        public_data={"amount": amount, "note": note, "friend": friend.full_name},
        private_data={
            "sender_id": world.user_id("venmo", world.supervisor),
            "receiver_id": world.user_id("venmo", friend),
        },
    )


def total_received(world: World, variant: int) -> TaskContent:
    venmo, rng = world.models.venmo, world.rng
    friends = add_friends(world, 3)
    me = world.user_id("venmo", world.supervisor)
    for _ in range(8 + 2 * variant):
        sender = rng.choice(friends)
        incoming = rng.random() < 0.7
        venmo.Transaction.create_save(
            sender_id=world.user_id("venmo", sender) if incoming else me,
            receiver_id=me if incoming else world.user_id("venmo", sender),
            amount=round(rng.randint(300, 6000) / 100, 2),
            description=rng.choice(NOTES),
            created_at=world.now - timedelta(days=rng.randint(1, 40), hours=rng.randint(0, 12)),
        )
    friend = rng.choice(friends)
    days = rng.choice([14, 21, 30])
    since = (world.now - timedelta(days=days)).date()
    answer = round(
        sum(
            t.amount
            for t in venmo.Transaction.all()
            if t.sender_id == world.user_id("venmo", friend)
            and t.receiver_id == me
            and t.created_at.date() >= since
        ),
        2,
    )
    solution = login_code("venmo") + (
        "\ntotal = 0.0\npage = 0\nwhile True:\n"
        f"    batch = apis.venmo.show_transactions(access_token=venmo_token, user_email={friend.email!r}, "
        f"min_created_at={since.isoformat()!r}, page_index=page, page_limit=20)\n"
        "    if not batch:\n        break\n"
        "    total += sum(t['amount'] for t in batch if t['receiver']['email'] == email)\n"
        "    page += 1\n"
        "apis.supervisor.complete_task(answer=round(total, 2))"
    )
    return TaskContent(
        instruction=(
            f"How much money in total, in dollars, has my friend '{friend.full_name}' sent me on Venmo since "
            f"{since.strftime(INSTRUCTION_DATE_FORMAT)} (inclusive)?"
        ),
        answer=answer,
        tests=[ANSWER_TEST, NO_CHANGE_TEST],
        solution=solution,
        public_data={"friend": friend.full_name, "since": since.isoformat()},
    )


VENMO_TEMPLATES = (
    Template("venmo_pay_friend", ("venmo",), 1, False, pay_friend),
    Template("venmo_total_received", ("venmo",), 2, False, total_received),
)
