"""Write a PEFT LoRA adapter with seeded random weights for a local model (tests, benchmarks, smoke runs).

A freshly initialised LoRA has lora_B = 0 and so changes nothing; randomising lora_B with a seed gives
adapters whose outputs differ from the base model and from each other, which is what hot-swap tests need.
"""

from __future__ import annotations

from pathlib import Path

LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def write_random_lora_adapter(
    model_dir: str | Path, out_dir: str | Path, seed: int, rank: int = 8, scale: float = 0.5
) -> Path:
    """Save a rank-`rank` LoRA on all seven projections of `model_dir` with lora_B ~ N(0, scale²) seeded by `seed`."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    config = LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules=list(LORA_TARGET_MODULES), lora_dropout=0.0
    )
    peft_model = get_peft_model(model, config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * scale)
    out = Path(out_dir)
    peft_model.save_pretrained(str(out))
    return out
