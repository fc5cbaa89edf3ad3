"""Shared-prefix learning: a micro-batch whose trajectories start with the same P tokens runs them once.

The K rollouts of a group share their prompt token for token (and in AppWorld every trajectory shares
a ~3.5k-token system prompt). Unshared, a micro-batch of k trajectories of lengths L_i costs Σ L_i
token-forwards; shared, it costs P + Σ (L_i - P):

1. prefix forward: the decoder on the P shared tokens with `use_cache=True`, under autograd, giving the
   prefix's hidden states [P, H] and its per-layer keys/values;
2. suffix forward: the k suffixes as right-padded rows [k, max S_i] (positions P.., attention mask over
   prefix + own suffix) on a `DynamicCache` holding the prefix keys/values expanded to k rows, so the
   suffix queries attend to the prefix exactly as in the full sequence;
3. the hidden states are put back in packed order (a prefix row is gathered once per trajectory).

Gradients reach the prefix through both its own hidden states and the cached keys/values (autograd sums
the k expanded copies), so the loss and the LoRA gradients are those of the unshared computation up to
float summation order (tests/learner/test_prefix_sharing.py checks both against loop_agents/reference.py).
"""

from __future__ import annotations

import torch
from torch import nn


def common_prefix_length(seqs: list[list[int]]) -> int:
    """Number of leading tokens all sequences have in common."""
    if not seqs:
        return 0
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for t in range(n):
        token = first[t]
        if any(s[t] != token for s in seqs):
            return t
    return n


def shareable_prefix(seqs: list[list[int]], mode: str, min_tokens: int) -> int:
    """P to share for this micro-batch, 0 = run it unshared.

    Every trajectory keeps >= 1 suffix token (P <= min L_i - 1); `auto` shares from `min_tokens` on,
    `on` from 1 token. Sequences are the trajectories as trained (already cut to max_seq_len), so P
    never exceeds max_seq_len."""
    if mode == "off" or len(seqs) < 2:
        return 0
    prefix = min(common_prefix_length(seqs), min(len(s) for s in seqs) - 1)
    return prefix if prefix >= (1 if mode == "on" else min_tokens) else 0


def forward_cost(seqs: list[list[int]], mode: str, min_tokens: int) -> int:
    """Token-forwards of a micro-batch: Σ L_i unshared, Σ L_i - (k - 1) P shared."""
    return sum(len(s) for s in seqs) - (len(seqs) - 1) * shareable_prefix(seqs, mode, min_tokens)


def prefix_micro_batches(
    items: list[int], token_ids: dict[int, list[int]], token_budget: int, mode: str, min_tokens: int
) -> list[list[int]]:
    """Micro-batches of <= token_budget token-forwards with trajectories of a common prefix together.

    Items are visited in lexicographic token order (ties by index), so those sharing the longest prefix
    are neighbours, and a micro-batch grows while its shared cost (forward_cost) fits the budget (an
    item that does not fit alone goes alone). Membership of the minibatch is unchanged: only its split
    into gradient-accumulation steps differs from batching.micro_batches."""
    ordered = sorted(items, key=lambda i: (token_ids[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for item in ordered:
        candidate = current + [item]
        seqs = [token_ids[i] for i in candidate]
        if current and forward_cost(seqs, mode, min_tokens) > token_budget:
            batches.append(current)
            candidate = [item]
        current = candidate
    if current:
        batches.append(current)
    return batches


def shared_prefix_hidden(
    decoder: nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor, prefix_len: int
) -> torch.Tensor:
    """[N, H] last hidden states of a packed row whose k segments share their first `prefix_len` tokens,
    computed as one prefix forward + one forward of the k suffixes on the expanded cache (module docstring).

    input_ids, position_ids: [1, N], positions restarting at 0 per segment (batching.pack)."""
    from transformers import DynamicCache

    ids, positions = input_ids[0], position_ids[0]
    starts = torch.nonzero(positions == 0).flatten()
    segment_lengths = torch.diff(starts, append=starts.new_tensor([positions.numel()]))
    k = int(starts.numel())
    longest_suffix = int(segment_lengths.max()) - prefix_len
    device = input_ids.device

    prefix = decoder(
        input_ids=ids[None, :prefix_len], position_ids=position_ids[:, :prefix_len], use_cache=True
    )
    cached = [(layer.keys, layer.values) for layer in prefix.past_key_values.layers]
    # expand (no copy): the suffix forward's torch.cat materialises [k, heads, P + S, d] per layer anyway
    expanded = [(key.expand(k, -1, -1, -1), value.expand(k, -1, -1, -1)) for key, value in cached]
    cache = DynamicCache(ddp_cache_data=expanded, config=decoder.config)

    row = torch.repeat_interleave(torch.arange(k, device=device), segment_lengths)
    in_suffix = positions >= prefix_len
    column = positions - prefix_len
    suffix_ids = ids.new_zeros(k, longest_suffix)
    suffix_ids[row[in_suffix], column[in_suffix]] = ids[in_suffix]
    attention_mask = ids.new_zeros(k, prefix_len + longest_suffix)
    attention_mask[:, :prefix_len] = 1
    attention_mask[row[in_suffix], prefix_len + column[in_suffix]] = 1
    suffix_positions = torch.arange(prefix_len, prefix_len + longest_suffix, device=device).expand(k, -1)
    suffix = decoder(
        input_ids=suffix_ids,
        attention_mask=attention_mask,
        position_ids=suffix_positions,
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state  # [k, S, H]

    rows = torch.cat([prefix.last_hidden_state[0], suffix.reshape(k * longest_suffix, -1)])
    index = torch.where(in_suffix, prefix_len + row * longest_suffix + column, positions)
    return rows.index_select(0, index)
