"""Shared-prefix learning on a GPU, bf16, on a 0.5B-shape Qwen2 (issue 21's GPU row), with the learner's MFU.

    torchrun --standalone --nproc-per-node 1 -m benchmarks.gpu_prefix_sharing OUT.json [--small] [--size 0.5b|1.5b]

The model has Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 query / 2 KV heads, MLP 4864, vocabulary
151,936, tied embeddings; random weights, built locally: no download). The batch is
`learner_prefix_sharing`'s AppWorld-shaped group: K = 6 trajectories sharing a 3,500-token prompt, then 4
turns of 220 generated (trained) + 30 observation tokens each. Sides, on the same batch and initial weights,
repetitions interleaved, best wall time of each reported (torch.cuda.synchronize around every iteration):
`unshared` (learner.share_prefix=off) and `shared` (on), each with and without activation checkpointing (with
it, `on` falls back to unshared by design: the prefix's cache cannot be recomputed in backward). One
`train_iteration` = the old-log-prob recompute forward + forward/backward + optimizer step (LOOP's iteration).

MFU counts model FLOPs per trajectory token as if unshared (what a user gets per token of data):
3 passes x 2 N_matmul (recompute forward, train forward, backward to the activations; the frozen base gets
no weight gradient, LoRA's own FLOPs are negligible) + the causal attention's 3 x 4 x layers x d_model x L / 2,
over the GPU's dense bf16 peak (989 TFLOP/s, H100/H200 SXM). With sharing the GPU does fewer FLOPs for the
same tokens, so that figure can exceed the hardware's own utilisation; `hardware_mfu` counts the token-forwards
actually computed. `--small` runs a 4-layer model on a short group (a smoke test, also on CPU).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

from benchmarks.learner_prefix_sharing import FULL_SHAPE, K, advantaged_group

PEAK_BF16_FLOPS = 989e12  # H100 / H200 SXM dense bf16 (spec sheet)
SHAPES = {
    "0.5b": dict(hidden_size=896, num_layers=24, num_heads=14, num_kv_heads=2, intermediate_size=4864),
    "1.5b": dict(hidden_size=1536, num_layers=28, num_heads=12, num_kv_heads=2, intermediate_size=8960),
}
QWEN_VOCAB = 151_936


def build_model(small: bool, size: str = "0.5b") -> tuple[str, dict]:
    """A random Qwen2 of a Qwen2.5 shape (tiny tokenizer, embeddings resized to Qwen's vocabulary)."""
    from transformers import AutoModelForCausalLM

    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    shape = dict(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=384)
    model_dir = str(build_tiny_model(tempfile.mkdtemp(), TinyModelSpec(**(shape if small else SHAPES[size]))))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    if not small:
        model.resize_token_embeddings(QWEN_VOCAB)
        model.config.tie_word_embeddings = True
        model.tie_weights()
    model.save_pretrained(model_dir)
    params = {
        "total": sum(p.numel() for p in model.parameters()),
        "matmul": sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
        + model.config.vocab_size * model.config.hidden_size,  # the (tied) LM head is a matmul
        "layers": model.config.num_hidden_layers,
        "d_model": model.config.hidden_size,
        "vocab": model.config.vocab_size,
    }
    return model_dir, params


def flops_per_token(params: dict, length: int) -> float:
    """3 passes of 2 N_matmul + causal attention (QK^T and AV: 4 d L / 2 per layer and pass)."""
    return 3 * (2 * params["matmul"] + 4 * params["layers"] * params["d_model"] * length / 2)


def run(small: bool, size: str = "0.5b") -> dict:
    from loop_agents.learner import Learner, LearnerConfig

    cuda = torch.cuda.is_available()
    model_dir, params = build_model(small, size)
    shape = dict(prompt_len=256, turns=2, gen=32, obs=8) if small else FULL_SHAPE
    trajectories, algorithm, length = advantaged_group(shape, vocab=params["vocab"])
    base = dict(model_path=model_dir, dtype="bfloat16", device="cuda" if cuda else "cpu", epochs=1,
                minibatch_size=K, max_grad_norm=1.0, max_seq_len=length, micro_token_budget=K * length)  # fmt: skip
    sides = {
        "unshared": dict(share_prefix="off"),
        "shared": dict(share_prefix="on"),
        "unshared_ckpt": dict(share_prefix="off", activation_checkpointing=True),
        "shared_auto_ckpt": dict(share_prefix="auto", activation_checkpointing=True),
    }
    tokens = sum(len(t.token_ids) for t in trajectories)
    computed = {"unshared": tokens, "shared": tokens - (K - 1) * shape["prompt_len"]}
    computed |= {"unshared_ckpt": tokens, "shared_auto_ckpt": tokens}
    result: dict = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
                    "world_size": dist.get_world_size() if dist.is_initialized() else 1, "params": params,
                    "batch": f"{K} x {length} tokens sharing a {shape['prompt_len']}-token prompt "
                             f"({shape['turns']} turns of {shape['gen']} generated + {shape['obs']} observation tokens)",
                    "tokens_per_iteration": tokens, "sides": {}}  # fmt: skip
    per_token = flops_per_token(params, length)
    for name, extra in sides.items():
        try:
            learner = Learner(LearnerConfig(**base, **extra), algorithm)
            batch = copy.deepcopy(trajectories)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            first = learner.train_iteration(batch)  # warm-up (kernels, allocator)
            seconds = []
            for _ in range(3):
                if cuda:
                    torch.cuda.synchronize()
                start = time.perf_counter()
                learner.train_iteration(batch)
                if cuda:
                    torch.cuda.synchronize()
                seconds.append(time.perf_counter() - start)
            best = min(seconds)
            result["sides"][name] = {
                "iteration_s": [round(s, 4) for s in seconds],
                "tokens_per_s": round(tokens / best, 1),
                "first_loss": first["loss"],
                "first_grad_norm": first["grad_norm"],
                "prefix_tokens_saved": first.get("prefix_tokens_saved", 0.0),
                "peak_memory_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
                "mfu": round(tokens * per_token / best / PEAK_BF16_FLOPS, 4),
                "hardware_mfu": round(computed[name] * per_token / best / PEAK_BF16_FLOPS, 4),
            }
            del learner
            if cuda:
                torch.cuda.empty_cache()
        except Exception as error:  # noqa: BLE001 - recorded; the next side runs
            result["sides"][name] = {"error": f"{type(error).__name__}: {error}"[:2000]}
    sides_done = result["sides"]
    if "tokens_per_s" in sides_done.get("shared", {}) and "tokens_per_s" in sides_done.get("unshared", {}):
        result["ratio_shared_vs_unshared"] = round(
            sides_done["shared"]["tokens_per_s"] / sides_done["unshared"]["tokens_per_s"], 3
        )
        # compared on the grad norm: the first iteration's loss is ~0 (every ratio is 1)
        shared, unshared = sides_done["shared"]["first_grad_norm"], sides_done["unshared"]["first_grad_norm"]
        result["first_grad_norm_rel_diff"] = abs(shared - unshared) / unshared
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--size", choices=sorted(SHAPES), default="0.5b")
    args = parser.parse_args()
    if "WORLD_SIZE" in os.environ and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    result = run(args.small, args.size)
    if not dist.is_initialized() or dist.get_rank() == 0:
        with open(args.out, "w") as out:
            json.dump(result, out, indent=2)
        json.dump(result, sys.stdout, indent=2)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
