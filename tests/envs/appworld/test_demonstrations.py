"""AppWorld warm-start demonstrations: scripted solutions pass the real engine's tests, their noisy variants
fail them, the kept ones are drawn with the configured noise, and the splits are disjoint scenarios."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from loop_agents.config.load import compose
from loop_agents.envs.appworld.config import AppWorldConfig
from loop_agents.envs.appworld.data_builder.templates import ALL_TEMPLATES
from loop_agents.envs.appworld.demos.episodes import played_episodes, scenario_families
from loop_agents.envs.appworld.demos.noise import NOISE_KINDS, noisy_cells
from loop_agents.envs.appworld.demos.scripted import SCRIPTS, clean_cells, written_value
from loop_agents.envs.appworld.demos.warm_start import appworld_demonstrations
from loop_agents.envs.appworld.splits import available_splits, scenario_of, split_task_ids
from loop_agents.envs.selected import make_agent
from loop_agents.orchestration.demonstrations import demonstrations
from loop_agents.rollout.chat import ChatFormat

PUBLIC = {
    "note_count_tag": {"tag": "work"},
    "venmo_pay_friend": {"friend": "Chen Xu", "amount": 12.5, "note": "groceries"},
    "todoist_complete_due": {"project": "Home", "cutoff": "2023-05-01"},
}


def test_every_training_family_has_a_script() -> None:
    assert {t.name for t in ALL_TEMPLATES if not t.challenge} <= set(SCRIPTS)


@pytest.mark.parametrize("template", sorted(PUBLIC))
def test_a_noisy_variant_differs_in_exactly_one_mistake(template: str) -> None:
    clean = clean_cells(template, PUBLIC[template])
    assert clean[-1].startswith("apis.supervisor.complete_task(")
    for kind in NOISE_KINDS:
        noisy = noisy_cells(template, PUBLIC[template], kind, seed="s")
        assert noisy == noisy_cells(template, PUBLIC[template], kind, seed="s")  # deterministic
        changed = [i for i, (a, b) in enumerate(zip(clean, noisy, strict=True)) if a != b]
        if kind == "wrong_argument":  # one of the values named at the top of the first cell, nothing else
            lines = [
                (a, b) for a, b in zip(clean[0].splitlines(), noisy[0].splitlines(), strict=True) if a != b
            ]
            assert (
                changed == [0]
                and len(lines) == 1
                and lines[0][0].split(" = ")[0] == lines[0][1].split(" = ")[0]
            )
        else:
            assert len(changed) == 1 and 0 not in changed, (
                kind,
                changed,
            )  # the first cell is never the mistake
    values = [written_value(slot, v) for slot, v in PUBLIC[template].items()]
    assert all(value in clean[0] and value not in "".join(clean[1:]) for value in values)  # each written once
    if template == "todoist_complete_due":  # a date as the instruction words it, converted in the cell
        assert "cutoff = 'May 1, 2023'" in clean[0] and "2023-05-01" not in "".join(clean)
    with pytest.raises(KeyError, match="no scripted solution"):
        clean_cells("spotify_playlist_minutes", {})


# The longest spellings the data builder draws: a September date, a two-word name, a cent amount, long titles.
LONG_VALUES = {"tag": "recipes", "cutoff": "2023-09-28", "since": "2023-09-28", "friend": "Amara Haddad",
               "amount": 1151.34, "note": "book club snacks", "priority": "high", "project": "Side project",
               "title": "Conference talks", "line": "Call mom on Sunday"}  # fmt: skip


@pytest.mark.parametrize("experiment", ["appworld_demo", "debug"])
def test_every_scripted_cell_fits_the_presets_generation_budget(experiment, tiny_model_dir) -> None:
    """A cell the policy must write longer than `llm.max_new_tokens` is cut before its closing fence, and the
    turn is lost ("no complete Python code block"): the date-converting first cells (~180 tokens) were, once."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    budget = compose([f"experiment={experiment}"]).llm.max_new_tokens
    for family in SCRIPTS:
        for cell in clean_cells(family, LONG_VALUES) + clean_cells(family, LONG_VALUES, read=True):
            message = f"```python\n{cell}\n```<|im_end|>"
            assert len(tokenizer(message)["input_ids"]) <= budget - 16, (
                family,
                cell,
            )  # room for a longer value


@pytest.mark.slow  # builds AppWorld data and runs the engine in the AppWorld venv
@pytest.mark.parametrize("demo_values", ["literal", "read"])
def test_scripted_episodes_pass_the_engines_tests_and_noisy_ones_fail(appworld_root, demo_values) -> None:
    """Both ways of naming the values: written in the first cell, or read from the task's instruction through
    `apis.supervisor.show_active_task()` (then a wrong argument is a guessed literal)."""
    config = AppWorldConfig(root=str(appworld_root), demo_values=demo_values)
    played = played_episodes(config, "train", seed=0)
    families = scenario_families(appworld_root)
    clean = [e for e in played if e["kind"] == "clean"]
    assert len(clean) == len(split_task_ids(appworld_root, "train"))
    assert {families[scenario_of(e["task_id"])] for e in clean} == set(SCRIPTS)  # every family played
    failed = [
        (e["task_id"], e["passes"], e["num_tests"], e["outputs"][-1]) for e in clean if not e["success"]
    ]
    assert not failed, failed
    for kind in NOISE_KINDS:
        episodes = [e for e in played if e["kind"] == kind]
        fail_rate = sum(not e["success"] for e in episodes) / len(episodes)
        print(f"[demos] {kind}: {len(episodes)} episodes, {fail_rate:.2f} fail the engine's tests")
        assert fail_rate >= (1.0 if kind == "wrong_answer" else 0.75), kind
    if demo_values == "read":
        assert all("show_active_task()" in e["cells"][0] and "quoted = " not in "".join(e["cells"][1:])
                   for e in clean)  # fmt: skip
    cache = max(
        (appworld_root / "loop_agents_demos").glob("train-*.jsonl"), key=lambda p: p.stat().st_mtime_ns
    )
    stamp = cache.stat().st_mtime_ns
    assert played_episodes(config, "train", seed=0) == played  # read back, not replayed
    assert cache.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_demonstrations_are_drawn_with_the_configured_noise(appworld_root, tiny_model_dir) -> None:
    cfg = compose(["experiment=debug", "env.prompt=compact", f"env.options.root={appworld_root}",
                   "env.options.demos_per_task=10", "env.options.demo_noise=0.5"])  # fmt: skip
    agent = make_agent(cfg)
    for noise, expected in ((0.0, {"clean"}), (1.0, set(NOISE_KINDS))):
        config = AppWorldConfig(root=str(appworld_root), demo_noise=noise, demos_per_task=2)
        drawn = appworld_demonstrations(config, agent, "train", cut=lambda text: text)
        assert set(drawn.kinds) == expected and not drawn.tasks_without_clean
    config = AppWorldConfig(root=str(appworld_root), demo_noise=0.5, demos_per_task=10)
    drawn = appworld_demonstrations(config, agent, "train", cut=lambda text: text)
    assert 0.35 < drawn.kinds["clean"] / sum(drawn.kinds.values()) < 0.65
    played = {(e["task_id"], tuple(e["cells"])): e for e in played_episodes(config, "train", 0)}
    for task_id, messages in drawn.demonstrations:
        cells = tuple(m["content"].removeprefix("```python\n").removesuffix("\n```") for m in messages
                      if m["role"] == "assistant")  # fmt: skip
        episode = played[(task_id, cells)]
        assert episode["success"] == (episode["kind"] == "clean")  # kept only where the engine agrees
        assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[-1]["role"] == "assistant"
        assert messages[3]["content"] == f"Output:\n```\n{episode['outputs'][0]}\n```"
    # through the warm start's own entry point: token-exact trajectories, only the cells trainable
    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    trajectories = demonstrations(cfg, chat)
    assert len(trajectories) == 10 * len(split_task_ids(appworld_root, "train"))
    first = trajectories[0]
    trained = chat.decode([t for t, m in zip(first.token_ids, first.loss_mask, strict=True) if m])
    assert "apis.supervisor.show_account_passwords()" in trained and "Supervisor:" not in trained


@pytest.mark.slow
def test_splits_are_disjoint_scenarios(appworld_root) -> None:
    """Different scenarios, people and instructions (names, notes, amounts): dev and test are held out."""
    owner: dict[tuple[str, str], str] = {}
    for split in available_splits(appworld_root):
        for task_id in split_task_ids(appworld_root, split):
            specs = json.loads((appworld_root / "data" / "tasks" / task_id / "specs.json").read_text())
            keys = [("scenario", scenario_of(task_id)), ("instruction", specs["instruction"]),
                    ("supervisor", specs["supervisor"]["email"])]  # fmt: skip
            for key in keys:
                assert owner.setdefault(key, split) == split, f"{key} is in {owner[key]} and {split}"
    assert len({split for split in owner.values()}) == len(available_splits(appworld_root)) == 4


def _scripted_train_and_dev_tasks(root):
    """(task id, family, specs.json) of every train and dev task whose family has a script."""
    families = scenario_families(root)
    for split in ("train", "dev"):
        for task_id in split_task_ids(root, split):
            if families[scenario_of(task_id)] in SCRIPTS:
                specs = json.loads((root / "data" / "tasks" / task_id / "specs.json").read_text())
                yield task_id, families[scenario_of(task_id)], specs


@pytest.mark.slow
def test_every_name_a_script_copies_is_quoted_in_the_instruction(appworld_root, tiny_model_dir) -> None:
    """A tag, project, title, line, note or friend the first cell writes as `'Elif Moreau'` stands quoted in the
    instruction too, so the policy's copy is token for token: the tokenizer gives ` Elif` (after a space) other
    tokens than `'Elif` (after a quote), and unquoted friend names got 0.01-0.03 on their first token (issue 19).
    Dates, amounts and the priority word are written as the instruction words them and are not names."""
    from loop_agents.envs.appworld.demos.episodes import task_values

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    checked = set()
    for task_id, family, specs in _scripted_train_and_dev_tasks(appworld_root):
        for slot, value in task_values(appworld_root, task_id, family).items():
            if not isinstance(value, str) or slot in {"cutoff", "since", "priority"}:
                continue
            written = written_value(slot, value)
            assert written in specs["instruction"], f"{task_id}: {written} is not in {specs['instruction']!r}"
            # as in the cell (`name = 'Elif Moreau'`); the closing quote merges with what follows it
            copied = tokenizer(f" {written[:-1]}")["input_ids"]
            source = tokenizer(specs["instruction"])["input_ids"]
            assert any(source[i : i + len(copied)] == copied for i in range(len(source))), (task_id, slot)
            checked.add(family)
    assert {"venmo_pay_friend", "venmo_total_received", "notes_to_todoist_tasks"} <= checked


@pytest.mark.slow
def test_read_values_are_the_tasks_own_on_train_and_held_out_tasks(appworld_root) -> None:
    """`demo_values=read`: the first cell's reading lines, run on each task's instruction (what
    `apis.supervisor.show_active_task()` returns), give exactly the task's public values, on dev as on train."""
    from loop_agents.envs.appworld.demos.episodes import task_values
    from loop_agents.envs.appworld.demos.scripted import TASK_LINE, VARIABLES

    checked = set()
    for task_id, family, specs in _scripted_train_and_dev_tasks(appworld_root):
        values = task_values(appworld_root, task_id, family)
        first = clean_cells(family, values, read=True)[0]
        reading = first[: first.index("passwords = ")].replace(TASK_LINE, "")
        assert repr(specs["instruction"]) not in first and all(
            written_value(slot, value) not in first for slot, value in values.items()
        )  # nothing of the task is written in the cell
        scope: dict = {"task": specs["instruction"]}
        exec(reading, scope)  # noqa: S102 - our own scripted lines on our own data
        # dates as the cell leaves them: ISO, as public_data holds them
        read = {slot: scope[VARIABLES.get(slot, slot)] for slot in values}
        assert read == values, (task_id, read, values)
        checked.add(family)
    assert checked == set(SCRIPTS)
