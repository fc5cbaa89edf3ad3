"""Gmail, Amazon and Splitwise scenarios whose honest changes name attachments (gmail's `has_attachments` column)
and whose values hold SQL words ("see attached", "vacuum", "pragma", "detach"): the saved-state check must score
them as AppWorld does. Not in `ALL_TEMPLATES` (the default data keeps its ids and bytes): `add_tasks` writes them
into an existing root, for the sandbox tests.
"""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

from loop_agents.envs.appworld.data_builder.spec import TaskContent, UnitTest
from loop_agents.envs.appworld.data_builder.task_writer import LOGIN_MODELS, World
from loop_agents.envs.appworld.data_builder.templates.base import NO_ANSWER_TEST, Template, login_code

BODY = "Hi, see attached the vacuum manual; detach the hose before you pragma-tically ATTACH DATABASE it. Thanks!"


def _account(world: World, app: str) -> None:
    """The supervisor's account on `app`, with its password where the supervisor and the evaluator look."""
    models, person = world.models, world.supervisor
    world.user_id(app, person)
    main_user = models.admin.MainUser.find_one(email=person.email)
    supervisor = models.supervisor.Supervisor.find_one(email=person.email)
    models.admin.AccountPassword.create_save(
        main_user_id=main_user.id, account_name=app, password=person.app_password
    )
    models.supervisor.AccountPassword.create_save(
        supervisor_id=supervisor.id, account_name=app, password=person.app_password
    )


def _content(world: World, app: str, instruction: str, solution: str, check: UnitTest) -> TaskContent:
    return TaskContent(
        instruction=instruction,
        answer=None,
        tests=[NO_ANSWER_TEST, check],
        solution=login_code(app) + "\n" + solution + "\napis.supervisor.complete_task()",
        private_data={"login_models": [*LOGIN_MODELS, f"{app}.User"]},
    )


def send_email(world: World, variant: int) -> TaskContent:
    _account(world, "gmail")
    friend = world.contacts[variant % len(world.contacts)]
    world.user_id("gmail", friend)
    subject = f"Vacuum attachments {variant}"
    check = UnitTest(
        "assert one email with the subject and body was sent to the friend.",
        "added, _, _ = models.changed_records('gmail.Email')\n"
        "test.case(len(added), '==', 1)\n"
        "test.case((added[0].subject, added[0].body), '==', (public_data['subject'], public_data['body']))",
    )
    solution = (
        f"apis.gmail.send_email(access_token=gmail_token, email_addresses=[{friend.email!r}], "
        f"subject={subject!r}, body={BODY!r})"
    )
    content = _content(
        world,
        "gmail",
        f"Email {friend.first_name} ({friend.email}) '{BODY}' with subject '{subject}'.",
        solution,
        check,
    )
    content.public_data.update(subject=subject, body=BODY)
    return content


def cart_vacuum(world: World, variant: int) -> TaskContent:
    _account(world, "amazon")
    amazon = world.models.amazon
    seller = amazon.Seller.create_save(name="Pragma Home Goods")
    product = amazon.Product.create_save(
        name=f"Cordless Vacuum with {variant + 2} Attachments",
        description="Detachable battery; VACUUM INTO the dust bin. See attached manual.",
        product_type="vacuum cleaner", seller_id=seller.id, price=99.0 + variant, delivery_days=3,
        weight=2.5, length=40, width=10, height=10, inventory_quantity=5,
    )  # fmt: skip
    check = UnitTest(
        "assert the vacuum is in the cart, twice.",
        "added, _, _ = models.changed_records('amazon.CartEntry')\n"
        "test.case([(e.product_id, e.quantity) for e in added], '==', [(private_data['product_id'], 2)])",
    )
    solution = (
        f"apis.amazon.add_product_to_cart(product_id={product.id}, quantity=2, access_token=amazon_token)"
    )
    content = _content(
        world, "amazon", f"Put two of the '{product.name}' in my Amazon cart.", solution, check
    )
    content.private_data["product_id"] = product.id
    return content


def record_expense(world: World, variant: int) -> TaskContent:
    _account(world, "splitwise")
    friend = world.contacts[variant % len(world.contacts)]
    world.user_id("splitwise", friend)
    description = f"Vacuum attachments {variant} (receipt attached; pragma: detach)"
    check = UnitTest(
        "assert one expense with the description was recorded.",
        "added, _, _ = models.changed_records('splitwise.Expense')\n"
        "test.case([e.description for e in added], '==', [public_data['description']])",
    )
    solution = (
        f"apis.splitwise.record_expense(access_token=splitwise_token, description={description!r}, "
        f"paid_amount=40.0, payer_email=email, debtor_emails=[{friend.email!r}])"
    )
    content = _content(
        world,
        "splitwise",
        f"Record a $40 Splitwise expense '{description}' that I paid and {friend.first_name} ({friend.email}) owes.",
        solution,
        check,
    )
    content.public_data["description"] = description
    return content


ATTACHMENT_TEMPLATES = (
    Template("gmail_send_attached", ("gmail",), 1, False, send_email),
    Template("amazon_cart_vacuum", ("amazon",), 1, False, cart_vacuum),
    Template("splitwise_expense_attached", ("splitwise",), 1, False, record_expense),
)


def add_tasks(root: Path, seed: int = 0) -> dict[str, str]:
    """Writes one task of each template into `root/data` (an existing built root); returns template -> task id."""
    from loop_agents.envs.appworld.data_builder.people import draw_people
    from loop_agents.envs.appworld.data_builder.task_writer import write_task

    written = {}
    for index, template in enumerate(ATTACHMENT_TEMPLATES):
        rng = random.Random(f"attachments:{seed}:{index}")
        people = draw_people(rng, 4)
        task_id = f"a{index:06x}_1"
        write_task(
            root / "data", task_id, lambda world, t=template: t.populate(world, 1), rng=rng, supervisor=people[0],
            contacts=people[1:], now=datetime(2023, 6, 1, 10, 0), difficulty=1, num_apps=1,
        )  # fmt: skip
        written[template.name] = task_id
    return written
