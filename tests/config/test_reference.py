"""The configuration reference (docs/reference/configuration.md) is generated from the schema and complete:
every key has its one-line meaning next to its field, and the page on disk is what the generator writes."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from loop_agents.config import field_docs, reference
from loop_agents.config.schema import RootConfig

ROOT = Path(__file__).resolve().parents[2]


def test_every_schema_key_has_its_one_line_meaning():
    assert field_docs.undocumented() == []
    keys = field_docs.schema_keys()
    assert len(keys) > 100 and all(doc for _, _, _, doc in keys)


def test_the_page_lists_every_key_with_its_type_default_and_meaning():
    page = reference.render()
    for key, _, _field, doc in field_docs.schema_keys():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row is not None, key
        assert reference._cell(doc) in row, key
    assert (
        "| `algorithm.advantage` | `str` | `loo` |  | `loo` \\| `grpo`" in page
    )  # choices from validate.CHOICES
    assert "| `algorithm.rollouts_per_task` | `int` | `6` |  | ≥ 2 |" in page  # bounds from LOWER_BOUNDS
    assert (
        "| `llm.model_path` | `str` | required (set by a preset) | `tiny` |" in page
    )  # the default run's value
    assert "`env.options.root`" in page and "| `experiment` | `appworld_demo` |" in page


def test_the_committed_page_is_up_to_date():
    done = subprocess.run(
        [sys.executable, "-m", "loop_agents.config.reference", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_a_field_without_a_meaning_fails_with_one_line(tmp_path, monkeypatch):
    """A new key with no comment is named by the check (the bad input of issue 41)."""

    @dataclasses.dataclass
    class Extra:
        """A section."""

        documented: int = 1  # has its line
        bare: int = 2

    assert field_docs.class_field_docs(Extra) == {"documented": "has its line", "bare": ""}

    @dataclasses.dataclass
    class Root(RootConfig):
        extra: Extra = dataclasses.field(default_factory=Extra)

    assert field_docs.undocumented(Root) == ["extra.bare"]
    monkeypatch.setattr(reference, "undocumented", lambda root=None: ["extra.bare"])
    problems = reference.check(ROOT)
    assert problems[0].startswith("schema key extra.bare has no one-line meaning")


def test_comments_above_and_across_lines_are_read():
    @dataclasses.dataclass
    class Block:
        # first line of a block
        # second line
        above: int = 0
        inline: int = 3  # a trailing comment inside the parentheses ruff format makes

    assert field_docs.class_field_docs(Block) == {
        "above": "first line of a block second line",
        "inline": "a trailing comment inside the parentheses ruff format makes",
    }
