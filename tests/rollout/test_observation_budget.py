"""Observation truncation to a token budget."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from loop_agents.rollout.observation import TRUNCATION_NOTE, truncate_observation


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_short_output_is_unchanged(tokenizer):
    text = "line one\nline two é 🙂"
    assert truncate_observation(text, tokenizer, n_tokens(tokenizer, text)) == (text, False)


def test_long_output_is_cut_at_a_line_within_the_budget(tokenizer):
    text = "".join(f"row {i}: value {i * i}\n" for i in range(2000))
    cut, truncated = truncate_observation(text, tokenizer, 100)
    assert truncated and cut.endswith(TRUNCATION_NOTE)
    kept = cut[: -len(TRUNCATION_NOTE)]
    assert text.startswith(kept) and text[len(kept)] == "\n"  # backed off to the end of a line
    assert 80 <= n_tokens(tokenizer, cut) <= 100 + 2


def test_multibyte_text_is_never_split_inside_a_character(tokenizer):
    text = "🙂é中" * 5000
    cut, truncated = truncate_observation(text, tokenizer, 50)
    kept = cut[: -len(TRUNCATION_NOTE)]
    assert truncated and text.startswith(kept) and "\ufffd" not in cut
    assert n_tokens(tokenizer, cut) <= 52


def test_huge_output_costs_only_the_budget(tokenizer):
    cut, truncated = truncate_observation("x" * 50_000_000, tokenizer, 64)
    assert truncated and n_tokens(tokenizer, cut) <= 66


def test_bad_budget_is_rejected(tokenizer):
    with pytest.raises(ValueError, match="budget"):
        truncate_observation("x", tokenizer, 0)
