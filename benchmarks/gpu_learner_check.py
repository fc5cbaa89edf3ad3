"""GPU check of the learner paths: NCCL + FSDP2, bf16, activation checkpointing, long sequences.

Run under torchrun on a CUDA machine (one or more GPUs):
    torchrun --nproc-per-node 1 -m benchmarks.gpu_learner_check OUT.json [--small]
(WORLD_SIZE set => NCCL process group => the learner shards with FSDP2; without CUDA it falls back
to gloo on CPU, which with --small is a quick local smoke test of this script.)

Sections, each recorded in OUT.json (an exception is recorded and the next section runs):
- oracle: the tiny test model and batch of tests/learner/test_oracle.py, the learner on the
  accelerator in float32 against loop_agents/reference.py on CPU (losses, grad norms, LoRA weights).
- cases: a ~25 M-parameter Qwen2 model, for each (float32|bfloat16) x (activation checkpointing
  off|on): learner log-probs of packed trajectories before training against a plain HF float32
  forward of each trajectory alone; 2 LOOP iterations (loss, grad norm, tokens/s, peak memory);
  save_checkpoint, reload of the adapter in peft (same log-probs as the learner?); one more
  iteration continued vs. resumed from the checkpoint (same numbers?); the memory stress test.
- compare: bfloat16 vs float32 and checkpointing on vs off on iteration 1.
- long: the stress test (one forward/backward, 90% trained tokens) at 16k and 32k tokens.
- variants: bfloat16 run-to-run noise, without FSDP, and with each LoRA Linear as its own FSDP group
  (ml-loop's layout) instead of in its layer's group (apply_fsdp2's), for speed and agreement.
- sdpa_probe: SDPA memory with enable_gqa per dtype (why float32 long sequences are quadratic).
Results of a run: benchmarks/results/gpu_learner_check.{json,md}.
Not part of CI (CI has no GPU).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from loop_agents.algorithms import compute_advantages, preset
from loop_agents.learner import Learner, LearnerConfig
from loop_agents.learner.distributed import apply_fsdp2
from loop_agents.learner.train_items import prepare_items
from loop_agents.rollout.trajectory import Trajectory
from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

REPO = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MODEL_SPEC = TinyModelSpec(hidden_size=512, num_layers=8, num_heads=8, num_kv_heads=2, intermediate_size=1536)


def is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def peak_gb() -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if CUDA else None


def reset_peak() -> None:
    if CUDA:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def rel_diff(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def make_batch(seed: int, small: bool, groups: int = 4, k: int = 4, vocab: int = 1500) -> list[Trajectory]:
    """Groups of K multi-turn trajectories: a prompt, then (action, observation) turns."""
    rng = random.Random(seed)
    prompt, turns, action, obs = (20, 3, (4, 12), (5, 15)) if small else (200, 6, (40, 120), (50, 150))
    out = []
    for g in range(groups):
        for i in range(k):
            traj = Trajectory(task_id=f"t{g}", group_id=f"t{g}", sample_index=i, reward=rng.random())
            traj.append_context([rng.randrange(10, vocab) for _ in range(prompt)])
            for _ in range(turns):
                n = rng.randint(*action)
                traj.append_generation([rng.randrange(10, vocab) for _ in range(n)], [-2.0] * n)
                traj.append_context([rng.randrange(10, vocab) for _ in range(rng.randint(*obs))])
            out.append(traj)
    return out


def hf_logprobs(model: torch.nn.Module, trajs: list[Trajectory], device: torch.device) -> list[torch.Tensor]:
    """Log-probs of every trained token of each trajectory, one plain forward per trajectory."""
    out = []
    with torch.no_grad():
        for traj in trajs:
            ids = torch.tensor([traj.token_ids], device=device)
            logits = model(input_ids=ids).logits[0, :-1].float()
            picked = torch.gather(F.log_softmax(logits, dim=-1), 1, ids[0, 1:, None])[:, 0]
            mask = torch.tensor(traj.loss_mask[1:], dtype=torch.bool, device=device)
            out.append(picked[mask].cpu())
    return out


def learner_logprobs(learner: Learner, trajs: list[Trajectory]) -> list[torch.Tensor]:
    """The learner's own (packed, chunked, sharded) log-probs of the trained tokens. Collective."""
    items, _ = prepare_items(trajs, None, None, learner.cfg, need_advantages=False)
    return learner._forward_all(items)[0]


def max_abs(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def learner_config(model_dir: str, dtype: str, checkpointing: bool, **overrides: Any) -> LearnerConfig:
    base = dict(
        model_path=model_dir,
        dtype=dtype,
        device=DEVICE,
        lora_r=16,
        lora_alpha=32,
        lr=1e-3,  # larger than LOOP's 5e-5 so that 2 iterations visibly move a 25 M model
        minibatch_size=8,
        epochs=2,
        micro_token_budget=8192,
        max_seq_len=4096,
        activation_checkpointing=checkpointing,
        seed=0,
    )
    base.update(overrides)
    return LearnerConfig(**base)


def train(learner: Learner, seed: int, small: bool) -> dict[str, float]:
    trajs = make_batch(seed, small)
    compute_advantages(trajs, learner.algorithm)
    sync()
    start = time.perf_counter()
    metrics = learner.train_iteration(trajs)
    sync()
    metrics["wall_s"] = time.perf_counter() - start
    return metrics


# ---------------------------------------------------------------------------- sections
def oracle_check(work: Path) -> dict[str, Any]:
    """The learner on DEVICE (float32, FSDP2 under torchrun) against the CPU reference."""
    from loop_agents import reference as ref

    # by file: an installed package named `tests` would shadow the repo's namespace package
    spec = importlib.util.spec_from_file_location("learner_test_batch", REPO / "tests/learner/batch.py")
    tb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tb)

    model_dir = str(work / "oracle_model")
    if is_main():
        build_tiny_model(model_dir)
    barrier()
    cfg = tb.reference_config()
    model = ref.load_lora_policy(model_dir, cfg)
    optimizer = ref.make_optimizer(model, cfg)
    rollouts = [ref.Rollout(t.group_id, t.token_ids, t.loss_mask, t.reward) for t in tb.make_batch(seed=0)]
    history = ref.loop_iteration(model, optimizer, rollouts, cfg)
    ref_state = {"peft_model." + k: v for k, v in ref.lora_state(model).items()}

    batch = tb.make_batch(seed=0)
    compute_advantages(batch, tb.loop_algorithm())
    learner = Learner(tb.learner_config(model_dir, device=DEVICE), tb.loop_algorithm())
    learner.train_iteration(batch)
    state = learner.trainable_state()
    steps = learner.step_history
    del learner
    return {
        "steps": len(steps),
        "loss_rel_diff_max": max(rel_diff(o["loss"], r["loss"]) for o, r in zip(steps, history, strict=True)),
        "grad_norm_rel_diff_max": max(
            rel_diff(o["grad_norm"], r["grad_norm"]) for o, r in zip(steps, history, strict=True)
        ),
        "clip_fraction_equal": all(
            abs(o["clip_fraction"] - r["clip_fraction"]) < 1e-9 for o, r in zip(steps, history, strict=True)
        ),
        "lora_max_abs_diff": max(float((state[k] - v).abs().max()) for k, v in ref_state.items()),
        "lora_b_moved": max(float(v.abs().max()) for k, v in ref_state.items() if "lora_B" in k),
        "same_tensor_names": set(state) == set(ref_state),
    }


def run_case(
    model_dir: str, work: Path, dtype: str, checkpointing: bool, small: bool, hf_ref: list[torch.Tensor]
) -> dict[str, Any]:
    probe = make_batch(99, small)[:4]
    result: dict[str, Any] = {"dtype": dtype, "activation_checkpointing": checkpointing}
    reset_peak()
    learner = Learner(learner_config(model_dir, dtype, checkpointing), preset("loop"))
    result["fsdp"] = learner.fsdp
    result["gradient_checkpointing_active"] = learner.policy.causal_lm.is_gradient_checkpointing
    result["logprob_vs_hf_fp32_max_abs"] = max_abs(learner_logprobs(learner, probe), hf_ref)
    metrics = [train(learner, it, small) for it in range(2)]
    result.update(
        {
            "loss": [m.get("loss") for m in metrics],
            "grad_norm": [m.get("grad_norm") for m in metrics],
            "step1_loss": learner.step_history[0]["loss"],
            "step1_grad_norm": learner.step_history[0]["grad_norm"],
            "clip_fraction": [m.get("clip_fraction") for m in metrics],
            "tokens_per_s": [m.get("tokens_per_s") for m in metrics],
            "packed_tokens_per_iter": sum(
                s["packed_tokens"] for s in learner.step_history[-int(metrics[-1]["num_steps"]) :]
            ),
            "wall_s": [m["wall_s"] for m in metrics],
            "skipped_nonfinite": sum(m.get("num_skipped_nonfinite", 0) for m in metrics),
            "peak_memory_gb": peak_gb(),
        }
    )
    # checkpoint, then the adapter in peft must give the learner's log-probs
    trained = learner_logprobs(learner, probe)
    result["trained_vs_base_max_abs"] = max_abs(trained, hf_ref)
    ckpt_dir = work / f"ckpt_{dtype}_{int(checkpointing)}" / "checkpoint-2"
    learner.save_checkpoint(ckpt_dir, {"next_batch": 2})
    if is_main():
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=DTYPES[dtype]).to(DEVICE)
        peft_model = PeftModel.from_pretrained(base, ckpt_dir / "adapter").eval()
        result["adapter_reload_vs_learner_max_abs"] = max_abs(hf_logprobs(peft_model, probe, DEVICE), trained)
        del base, peft_model
    barrier()
    # resume: a fresh learner loaded from the checkpoint must continue exactly as the original
    continued = train(learner, 2, small)
    continued_state = learner.trainable_state()
    del learner
    resumed_learner = Learner(learner_config(model_dir, dtype, checkpointing), preset("loop"))
    extra = resumed_learner.load_checkpoint(ckpt_dir)
    resumed = train(resumed_learner, 2, small)
    resumed_state = resumed_learner.trainable_state()
    result["resume"] = {
        "extra_state_ok": extra == {"next_batch": 2},
        "loss_rel_diff": rel_diff(resumed["loss"], continued["loss"]),
        "grad_norm_rel_diff": rel_diff(resumed["grad_norm"], continued["grad_norm"]),
        "state_max_abs_diff": max(
            float((resumed_state[k] - v).abs().max()) for k, v in continued_state.items()
        ),
    }
    result["stress_test"] = resumed_learner.stress_test()
    del resumed_learner
    if CUDA:
        torch.cuda.empty_cache()
    return result


def comparisons(cases: list[dict[str, Any]]) -> dict[str, Any]:
    by = {(c["dtype"], c["activation_checkpointing"]): c for c in cases if "error" not in c}
    out: dict[str, Any] = {}
    for ckpt in (False, True):
        f32, b16 = by.get(("float32", ckpt)), by.get(("bfloat16", ckpt))
        if f32 and b16:
            out[f"bf16_vs_fp32_ckpt{int(ckpt)}"] = {
                "iter1_loss_rel": rel_diff(b16["loss"][0], f32["loss"][0]),
                "step1_grad_norm_rel": rel_diff(b16["step1_grad_norm"], f32["step1_grad_norm"]),
                "iter2_loss_rel": rel_diff(b16["loss"][1], f32["loss"][1]),
            }
    for dtype in DTYPES:
        off, on = by.get((dtype, False)), by.get((dtype, True))
        if off and on:
            out[f"ckpt_on_vs_off_{dtype}"] = {
                "iter1_loss_rel": rel_diff(on["loss"][0], off["loss"][0]),
                "step1_grad_norm_rel": rel_diff(on["step1_grad_norm"], off["step1_grad_norm"]),
                "iter2_loss_rel": rel_diff(on["loss"][1], off["loss"][1]),
            }
    return out


def long_stress(model_dir: str, dtype: str, checkpointing: bool, lengths: list[int]) -> dict[str, Any]:
    cfg = learner_config(model_dir, dtype, checkpointing, max_seq_len=max(lengths))
    learner = Learner(cfg, preset("loop"))
    out: dict[str, Any] = {"dtype": dtype, "activation_checkpointing": checkpointing}
    for n in lengths:
        try:
            out[str(n)] = learner.stress_test(n)
        except torch.OutOfMemoryError as exc:
            out[str(n)] = {"error": f"OutOfMemoryError: {exc}"[:500]}
            torch.cuda.empty_cache()
    del learner
    if CUDA:
        torch.cuda.empty_cache()
    return out


def apply_fsdp2_lora_own_groups(policy, ctx, dtype: str) -> None:
    """ml-loop's layout (the learner's until 2026-11-24): each LoRA Linear its own FSDP group under a
    low-precision base, then each layer and the root as learner.distributed.apply_fsdp2 does."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if dtype != "float32":
        kwargs: dict = {"mesh": init_device_mesh(ctx.device.type, (ctx.world_size,))}
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=DTYPES[dtype], reduce_dtype=torch.float32)
        for layer in policy.decoder_layers():
            for name, module in layer.named_modules():
                if isinstance(module, torch.nn.Linear) and (
                    ".lora_A." in f".{name}." or ".lora_B." in f".{name}."
                ):
                    fully_shard(module, **kwargs)
    apply_fsdp2(policy, ctx, dtype)


def variants(model_dir: str, small: bool) -> dict[str, Any]:
    """bfloat16 2-iteration runs: run-to-run noise floor, without FSDP, each LoRA Linear its own FSDP group."""
    from loop_agents.learner import trainer

    def one(
        use_fsdp: bool = True, lora_groups: bool = False
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        original = trainer.apply_fsdp2
        if lora_groups:
            trainer.apply_fsdp2 = apply_fsdp2_lora_own_groups
        try:
            reset_peak()
            learner = Learner(learner_config(model_dir, "bfloat16", False, use_fsdp=use_fsdp), preset("loop"))
        finally:
            trainer.apply_fsdp2 = original
        metrics = [train(learner, it, small) for it in range(2)]
        state = learner.trainable_state()
        summary = {
            "fsdp": learner.fsdp,
            "loss": [m["loss"] for m in metrics],
            "step1_grad_norm": learner.step_history[0]["grad_norm"],
            "tokens_per_s": [m["tokens_per_s"] for m in metrics],
            "peak_memory_gb": peak_gb(),
        }
        del learner
        return summary, state

    def versus(a: tuple, b: tuple) -> dict[str, float]:
        return {
            "loss_rel": [rel_diff(x, y) for x, y in zip(a[0]["loss"], b[0]["loss"], strict=True)],
            "step1_grad_norm_rel": rel_diff(a[0]["step1_grad_norm"], b[0]["step1_grad_norm"]),
            "state_max_abs_diff": max(float((a[1][k] - v).abs().max()) for k, v in b[1].items()),
        }

    out: dict[str, Any] = {}
    first, second = one(), one()
    out["bf16_fsdp"] = first[0]
    out["bf16_fsdp_run_to_run"] = versus(second, first)
    for name, kwargs in (
        ("bf16_no_fsdp", {"use_fsdp": False}),
        ("bf16_fsdp_lora_own_groups", {"lora_groups": True}),
    ):
        try:
            other = one(**kwargs)
            out[name] = {**other[0], "vs_bf16_fsdp": versus(other, first)}
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
    return out


def sdpa_probe(n: int = 8192) -> dict[str, Any]:
    """Peak memory of one causal SDPA forward+backward with 8 query / 2 KV heads (the model's shape):
    transformers passes enable_gqa=True when there is no mask, which float32 sends to the math kernel."""
    out: dict[str, Any] = {"seq_len": n}
    for dtype in DTYPES:
        for gqa in (True, False):
            q = torch.randn(1, 8, n, 64, device=DEVICE, dtype=DTYPES[dtype], requires_grad=True)
            k = torch.randn(1, 2, n, 64, device=DEVICE, dtype=DTYPES[dtype], requires_grad=True)
            v = torch.randn_like(k, requires_grad=True)
            reset_peak()
            if gqa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                y = F.scaled_dot_product_attention(
                    q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), is_causal=True
                )
            y.sum().backward()
            out[f"{dtype}_enable_gqa_{gqa}_peak_gb"] = peak_gb()
            del q, k, v, y
    return out


def section(fn, *args) -> Any:
    """Run one section; record its result or its error (this is a report, not a test)."""
    start = time.perf_counter()
    try:
        value = fn(*args)
    except Exception as exc:
        value = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-3000:]}
        if is_main():
            print(value["traceback"], file=sys.stderr, flush=True)
    if isinstance(value, dict):
        value["section_seconds"] = round(time.perf_counter() - start, 2)
    return value


def main() -> None:
    args = sys.argv[1:]
    small = "--small" in args
    paths = [a for a in args if not a.startswith("--")]
    out = Path(paths[0] if paths else "gpu_learner_check.json")
    if "WORLD_SIZE" in os.environ:
        if CUDA:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
    box = [tempfile.mkdtemp(prefix="gpu_learner_check_") if is_main() else ""]
    if dist.is_initialized():
        dist.broadcast_object_list(box, src=0)  # one shared work dir (single node)
    work = Path(box[0])
    model_dir = str(work / "model")
    if is_main():
        build_tiny_model(model_dir, TinyModelSpec() if small else MODEL_SPEC)
    barrier()
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if CUDA else "cpu",
        "torch": torch.__version__,
        "world_size": dist.get_world_size() if dist.is_initialized() else 1,
        "backend": dist.get_backend() if dist.is_initialized() else None,
        "small": small,
    }
    try:
        import peft
        import transformers

        results["transformers"], results["peft"] = transformers.__version__, peft.__version__
    except ImportError:
        pass
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(DEVICE).eval()
    results["model_parameters"] = sum(p.numel() for p in base.parameters())
    hf_ref = hf_logprobs(base, make_batch(99, small)[:4], torch.device(DEVICE))
    del base

    def save() -> None:
        if is_main():
            out.write_text(json.dumps(results, indent=2))

    results["oracle"] = section(oracle_check, work)
    save()
    results["cases"] = []
    for dtype in DTYPES:
        for checkpointing in (False, True):
            case = section(run_case, model_dir, work, dtype, checkpointing, small, hf_ref)
            case.setdefault("dtype", dtype)
            case.setdefault("activation_checkpointing", checkpointing)
            results["cases"].append(case)
            save()
    results["compare"] = comparisons(results["cases"])
    lengths = [1024, 2048] if small else [16384, 32768]
    results["long"] = [
        section(long_stress, model_dir, dtype, ckpt, lengths)
        for dtype, ckpt in (("bfloat16", True), ("bfloat16", False), ("float32", True))
    ]
    results["variants"] = section(variants, model_dir, small)
    if CUDA:
        results["sdpa_probe"] = section(sdpa_probe)
    save()
    if is_main():
        print(json.dumps(results, indent=2), flush=True)
    barrier()
    if is_main():
        shutil.rmtree(work, ignore_errors=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
