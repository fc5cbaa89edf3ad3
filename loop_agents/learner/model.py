"""The trainable policy: HF causal LM + peft LoRA (+ optional value head), returning token log-probs.

`PolicyModel.forward` takes one packed row of several trajectories and the positions whose next
token is trained, and returns only those tokens' log-probs (chunked, logprobs.py) and values. It
is the FSDP2 root module, so the tied embedding / lm-head weight is unsharded inside its forward.

Attention over a packed row costs N^2 for N = sum of the trajectory lengths L_i unless the
attention kernel is varlen (`flash_attention_2` reads the restarting position ids): SDPA and eager
build a dense block-diagonal mask. For those, a micro-batch whose padded layout is cheaper
(k * max L_i^2 < N^2) runs as [k, max L_i] right-padded rows instead; the hidden states are then
put back in packed order, so everything after the decoder is the same for both layouts.

A micro-batch whose trajectories share their first P tokens (`shared_prefix=P`) runs the prefix once and
the suffixes on its key/value cache (prefix_sharing.py), again returning hidden states in packed order.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from loop_agents.learner.config import LearnerConfig
from loop_agents.learner.logprobs import chunked_token_logprobs, chunked_token_logprobs_and_entropy
from loop_agents.learner.prefix_sharing import shared_prefix_hidden
from loop_agents.progress_lines import Heartbeat

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def padded_is_cheaper(lengths: list[int]) -> bool:
    """True when k right-padded rows (k * max L^2 attention scores) beat one packed row (N^2, N = sum L)."""
    return len(lengths) > 1 and len(lengths) * max(lengths) ** 2 < sum(lengths) ** 2


class TokenOutputs(NamedTuple):
    """Per trained token: log-prob of the target, and (on request) the critic's value and the policy entropy."""

    logprobs: torch.Tensor  # [n] float32
    values: torch.Tensor | None  # [n] float32
    entropy: torch.Tensor | None  # [n] float32


class ValueHead(nn.Module):
    """MLP critic on the (detached) last hidden state: H → widths... → 1 (LOOP paper's PPO baseline)."""

    def __init__(self, hidden_size: int, widths: list[int]):
        super().__init__()
        layers: list[nn.Module] = []
        size = hidden_size
        for width in widths:
            layers += [nn.Linear(size, width), nn.GELU()]
            size = width
        layers.append(nn.Linear(size, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.mlp(hidden).squeeze(-1)


class PolicyModel(nn.Module):
    """LoRA policy (and critic) computing log-probs of selected tokens of a packed row."""

    def __init__(
        self, peft_model: nn.Module, value_head: ValueHead | None, chunk_size: int, temperature: float
    ):
        super().__init__()
        self.peft_model = peft_model
        self.value_head = value_head
        self.chunk_size = chunk_size
        self.temperature = temperature

    @property
    def causal_lm(self) -> nn.Module:
        return self.peft_model.base_model.model

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        gather_index: torch.Tensor,
        targets: torch.Tensor,
        with_values: bool = False,
        with_entropy: bool = False,
        shared_prefix: int = 0,
    ) -> TokenOutputs:
        """input_ids, position_ids: [1, N] (positions restart at 0 per packed trajectory);
        gather_index, targets: [n]; shared_prefix: P > 0 when all packed trajectories start with the same
        P tokens (computed once). Returns [n] log π(targets | prefix), values and entropies (or None)."""
        if shared_prefix > 0:
            hidden = shared_prefix_hidden(self.causal_lm.model, input_ids, position_ids, shared_prefix)
        else:
            hidden = self._decoder_hidden(input_ids, position_ids)
        selected = hidden.index_select(0, gather_index)
        head = (selected, self.causal_lm.lm_head.weight, targets, self.chunk_size, self.temperature)
        entropy = None
        if with_entropy:
            logprobs, entropy = chunked_token_logprobs_and_entropy(*head)
        else:
            logprobs = chunked_token_logprobs(*head)
        values = None
        if with_values and self.value_head is not None:
            values = self.value_head(selected.detach().float())  # value gradients stay out of LoRA
        return TokenOutputs(logprobs, values, entropy)

    def _decoder_hidden(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """[N, H] last hidden states of the packed row, computed packed or padded (module docstring)."""
        decoder = self.causal_lm.model
        packed = dict(input_ids=input_ids, position_ids=position_ids, use_cache=False)
        # attention_mask=None + restarting position_ids → block-diagonal causal attention
        if getattr(self.causal_lm.config, "_attn_implementation", "") == "flash_attention_2":
            return decoder(**packed).last_hidden_state[0]  # varlen: no lengths needed (no host sync)
        positions = position_ids[0]
        starts = torch.nonzero(positions == 0).flatten()
        segment_lengths = torch.diff(starts, append=starts.new_tensor([positions.numel()]))
        lengths = segment_lengths.tolist()
        if not padded_is_cheaper(lengths):
            return decoder(**packed).last_hidden_state[0]
        k, longest = len(lengths), max(lengths)
        row = torch.repeat_interleave(torch.arange(k, device=input_ids.device), segment_lengths)
        padded_ids = input_ids.new_zeros(k, longest)
        attention_mask = input_ids.new_zeros(k, longest)
        padded_ids[row, positions] = input_ids[0]
        attention_mask[row, positions] = 1
        padded_positions = torch.arange(longest, device=input_ids.device).expand(k, longest)
        hidden = decoder(
            input_ids=padded_ids,
            attention_mask=attention_mask,
            position_ids=padded_positions,
            use_cache=False,
        ).last_hidden_state
        return hidden[row, positions]

    def decoder_layers(self) -> list[nn.Module]:
        return list(self.causal_lm.model.layers)

    def named_trainable(self) -> dict[str, nn.Parameter]:
        return {n: p for n, p in self.named_parameters() if p.requires_grad}


def load_policy(cfg: LearnerConfig, device: torch.device) -> PolicyModel:
    """Load the base model, add a fresh LoRA adapter (B = 0, seeded A) and the optional value head."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    with Heartbeat("learner", f"loading {cfg.model_path}"):  # a line every 10 s while a large model loads
        base = AutoModelForCausalLM.from_pretrained(cfg.model_path, dtype=TORCH_DTYPES[cfg.dtype])
    base.config.use_cache = False
    torch.manual_seed(cfg.seed)
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.lora_target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(base, lora)
    for param in peft_model.parameters():
        if param.requires_grad:
            param.data = param.data.float()  # LoRA master weights in fp32 whatever the base dtype
    if cfg.activation_checkpointing:
        peft_model.base_model.model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
    value_head = None
    if cfg.value_head_hidden:
        torch.manual_seed(cfg.seed + 1)
        value_head = ValueHead(base.config.hidden_size, list(cfg.value_head_hidden)).float()
    policy = PolicyModel(peft_model, value_head, cfg.logprob_chunk_size, cfg.temperature)
    return policy.to(device)
