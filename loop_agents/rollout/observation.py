"""Cut an environment observation to a token budget (ml-loop §3.6, done exactly and in O(budget)).

The cut is made at a token's character offset, so it never splits a UTF-8 character, then backed
off to the last newline (or space) in the final fifth of the kept text so that a line is not cut
in the middle, and a note says the output was cut. Only about `budget * 16` characters are ever
tokenized, so a 100 MB output costs the same as a 50 KB one.
"""

from __future__ import annotations

from typing import Any

TRUNCATION_NOTE = "\n...\n[Output too long: only its beginning is shown.]"
_MAX_CHARS_PER_TOKEN = 16  # generous: BPE tokens of real vocabularies are shorter than this


def truncate_observation(text: str, tokenizer: Any, max_tokens: int) -> tuple[str, bool]:
    """Return (text cut to about `max_tokens` tokens including the note, whether it was cut)."""
    if max_tokens < 1:
        raise ValueError(f"observation budget must be >= 1 token, got {max_tokens}")
    window = text[: max_tokens * _MAX_CHARS_PER_TOKEN]
    encoding = tokenizer(window, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoding["offset_mapping"]
    if len(offsets) <= max_tokens and len(window) == len(text):
        return text, False
    note_tokens = len(tokenizer(TRUNCATION_NOTE, add_special_tokens=False)["input_ids"])
    keep_tokens = max(0, max_tokens - note_tokens)
    cut = offsets[keep_tokens][0] if keep_tokens < len(offsets) else len(window)
    kept = window[:cut]
    floor = max(1, len(kept) * 4 // 5)
    back_off = kept.rfind("\n")
    if back_off < floor:
        back_off = kept.rfind(" ")
    if back_off >= floor:
        kept = kept[:back_off]
    return kept + TRUNCATION_NOTE, True
