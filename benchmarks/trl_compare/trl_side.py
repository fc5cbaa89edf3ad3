"""TRL's side of the `trl_compare` benchmark; runs in the TRL venv (.venv-trl, see install.sh).

    .venv-trl/bin/python benchmarks/trl_compare/trl_side.py SPEC.json

SPEC (written by benchmarks/trl_compare.py): model_dir, task_ids (the exact prompt order our task
sampler draws), group size, tasks per generation, minibatch, max_new_tokens, lr, LoRA, threads,
generations. GRPOTrainer with HF `generate` (its default generation path on CPU), LoRA, beta 0 (no
reference model), loss_type "grpo", group-std scaled advantages, clip 0.2, one pass over each generation
batch in optimizer steps of `minibatch` completions, and the gem hunt reward of one turn computed by the
very code our environment runs (GemHuntGame + TextActionAgent's action parsing). Prints one JSON line
prefixed `TRL_RESULT ` with the time of each generation batch (generation + reward + learning).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # loop_agents' pure-Python gem hunt game (no vLLM/Ray needed)


def gem_hunt_reward(completions, task_id, **_) -> list[float]:
    """Reward of a one-turn gem hunt episode: the completion is the action, as our text agent parses it."""
    from loop_agents.envs.bundled.game import GemHuntGame
    from loop_agents.envs.bundled.tasks import generate_task, parse_task_id
    from loop_agents.rollout.text_agent import TextActionAgent

    agent = TextActionAgent()
    rewards = []
    for completion, tid in zip(completions, task_id, strict=True):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        game = GemHuntGame(generate_task(parse_task_id(tid)), spare_moves=1)
        parsed = agent.parse_action(text)
        if parsed.action is not None:
            game.step(parsed.action)
        rewards.append(game.reward)
    return rewards


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    import torch

    torch.set_num_threads(int(spec["threads"]))
    t_start = time.perf_counter()
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from loop_agents.envs.bundled.game import SYSTEM_PROMPT, GemHuntGame
    from loop_agents.envs.bundled.tasks import generate_task, parse_task_id

    def prompt(tid: str) -> list[dict]:
        game = GemHuntGame(generate_task(parse_task_id(tid)), spare_moves=1)
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": game.first_observation()},
        ]

    data = Dataset.from_list([{"prompt": prompt(t), "task_id": t} for t in spec["task_ids"]])
    k, per_gen, mb = int(spec["group_size"]), int(spec["tasks_per_generation"]), int(spec["minibatch"])
    generation_batch = per_gen * k
    steps_per_generation = generation_batch // mb
    generations = int(spec["generations"])

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.marks: list[float] = []
            self.completion_lengths: list[float] = []
            self.num_tokens: list[float] = []

        def on_train_begin(self, args, state, control, **kw):
            self.marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % steps_per_generation == 0:
                self.marks.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                self.completion_lengths.append(float(logs["completions/mean_length"]))
            if logs and "num_tokens" in logs:
                self.num_tokens.append(float(logs["num_tokens"]))

    tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"], padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    args = GRPOConfig(
        output_dir=spec["output_dir"],
        use_cpu=True,
        bf16=False,
        fp16=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        learning_rate=float(spec["lr"]),
        max_grad_norm=1.0,
        lr_scheduler_type="constant",
        num_train_epochs=1,
        max_steps=generations * steps_per_generation,
        per_device_train_batch_size=mb,
        gradient_accumulation_steps=1,
        steps_per_generation=steps_per_generation,
        num_generations=k,
        max_completion_length=int(spec["max_new_tokens"]),
        temperature=1.0,
        top_p=1.0,
        beta=0.0,
        num_iterations=1,
        epsilon=0.2,
        loss_type="grpo",
        scale_rewards="group",
        shuffle_dataset=False,
        use_vllm=False,
        dataloader_num_workers=0,
        model_init_kwargs={"dtype": torch.float32},
    )
    lora = spec["lora"]
    trainer = GRPOTrainer(
        model=spec["model_dir"],
        reward_funcs=gem_hunt_reward,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=LoraConfig(
            r=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=0.0,
            target_modules=lora["target_modules"],
            task_type="CAUSAL_LM",
        ),
        callbacks=[timer := Timer()],
    )
    t_ready = time.perf_counter()
    trainer.train()
    t_end = time.perf_counter()
    blocks = [b - a for a, b in zip(timer.marks, timer.marks[1:], strict=False)]
    result = {
        "generation_batch": generation_batch,
        "steps_per_generation": steps_per_generation,
        "block_s": blocks,
        "startup_s": t_ready - t_start,
        "process_s": t_end - t_start,
        "completion_length_mean": (
            sum(timer.completion_lengths) / len(timer.completion_lengths)
            if timer.completion_lengths
            else None
        ),
        "tokens_per_sample_mean": (timer.num_tokens[-1] / (generations * generation_batch))
        if timer.num_tokens
        else None,
        "threads": torch.get_num_threads(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print("TRL_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
