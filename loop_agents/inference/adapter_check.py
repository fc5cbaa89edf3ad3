"""Checks of a PEFT adapter directory before it reaches vLLM, whose own errors are vague.

`validate_adapter_dir` checks the layout and the rank; with the served model's directory it also
checks every LoRA tensor's shape against the model's layers, so an adapter trained on a different
base model is refused with the tensor, its shape and the expected one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from safetensors import safe_open

from loop_agents.inference.errors import AdapterError


def validate_adapter_dir(path: str, max_rank: int, model_path: str | None = None) -> int:
    """Check a PEFT adapter directory before sending it to vLLM (whose own errors are vague); returns its rank.

    With `model_path` (a local HF model directory) the LoRA tensor shapes are also checked against the model.
    """
    config_file = Path(path) / "adapter_config.json"
    if not config_file.is_file():
        raise AdapterError(f"{path} is not a PEFT adapter directory (no adapter_config.json)")
    if not any((Path(path) / f).is_file() for f in ("adapter_model.safetensors", "adapter_model.bin")):
        raise AdapterError(f"{path} has no adapter_model.safetensors")
    if max_rank <= 0:
        raise AdapterError("this server was started without enable_lora; it cannot load adapters")
    rank = int(json.loads(config_file.read_text())["r"])
    if rank > max_rank:
        raise AdapterError(f"adapter {path} has rank {rank} > the server's max_lora_rank {max_rank}")
    if model_path is not None:
        check_adapter_fits_model(path, model_path)
    return rank


_LORA_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+_proj)\.lora_([AB])\.weight$")


def check_adapter_fits_model(path: str, model_path: str) -> None:
    """Raise AdapterError if a LoRA tensor of the adapter at `path` does not fit `model_path`'s layers
    (an adapter trained on a different base model); models without a local config.json are not checked."""
    config_file, weights = Path(model_path) / "config.json", Path(path) / "adapter_model.safetensors"
    if not config_file.is_file() or not weights.is_file():
        return
    config = json.loads(config_file.read_text())
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    kv = config.get("num_key_value_heads", heads) * head_dim
    inter, q = config.get("intermediate_size"), heads * head_dim
    dims = {"q_proj": (hidden, q), "k_proj": (hidden, kv), "v_proj": (hidden, kv), "o_proj": (q, hidden),
            "gate_proj": (hidden, inter), "up_proj": (hidden, inter), "down_proj": (inter, hidden)}  # fmt: skip
    with safe_open(str(weights), framework="pt") as tensors:
        for key in tensors.keys():  # noqa: SIM118 - safe_open is not a mapping
            match = _LORA_KEY.search(key)
            if match is None or match.group(2) not in dims:
                continue
            layer, (d_in, d_out) = int(match.group(1)), dims[match.group(2)]
            shape = tuple(tensors.get_slice(key).get_shape())
            fits = shape[1] == d_in if match.group(3) == "A" else shape[0] == d_out
            if layer >= config["num_hidden_layers"] or not fits:
                expected = f"[r, {d_in}]" if match.group(3) == "A" else f"[{d_out}, r]"
                raise AdapterError(
                    f"adapter {path} does not fit the served model {model_path}: {key} has shape "
                    f"{list(shape)}, expected {expected} in a model of {config['num_hidden_layers']} layers "
                    "(trained on a different base model?)"
                )
