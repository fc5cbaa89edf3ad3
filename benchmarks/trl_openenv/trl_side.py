"""TRL's side of the `trl_openenv` benchmark; runs in the TRL venv (.venv-trl + openenv-core, see install.sh).

    .venv-trl/bin/python benchmarks/trl_openenv/trl_side.py SPEC.json

TRL's own environment path: `GRPOTrainer(environment_factory=GemHuntOpenEnv)`. Each rollout gets an instance of
`GemHuntOpenEnv`, which holds one session of OpenEnv's own client (`GenericEnvClient(...).sync()`) on our OpenEnv
server (`python -m loop_agents.envs.openenv serve bundled`, started by benchmarks/trl_openenv.py): TRL calls
`reset(**row)` (the row's `task_id` is passed to the server's reset) and appends the returned room to the prompt,
exposes `act` as the model's tool, and scores the rollout with `get_reward` (an episode the model did not end is
ended with `finish`, which scores it as it stands, as our turn budget does). Nothing of the game runs in this
process: every observation and reward comes from the server. Prints one JSON line prefixed `TRL_OPENENV_RESULT `.

The tiny model is built from scratch and has never seen a tool call, so before GRPO it gets a short warm start (plain
next-token loss over whole conversations, `warm_demos` episodes of the noisy scripted gem hunt solver on train tasks
other than GRPO's, rendered with the chat template as `act` tool calls and tool replies, the way TRL renders them):
enough for it to call the tool, so that TRL's tool loop actually steps our server.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

SPEC: dict = {}
COUNTS = {"sessions": 0, "resets": 0, "steps": 0, "finishes": 0}


class GemHuntOpenEnv:
    """The gem hunt served by loop_agents as OpenEnv, through OpenEnv's sync client (one session per instance)."""

    def __init__(self) -> None:
        from openenv.core.generic_client import GenericEnvClient

        self.client = GenericEnvClient(base_url=SPEC["url"], message_timeout_s=60.0).sync()
        self.client.connect()
        COUNTS["sessions"] += 1
        self.reward, self.done = 0.0, True

    def reset(self, task_id: str, **_) -> str:
        result = self.client.reset(task_id=task_id)
        COUNTS["resets"] += 1
        self.reward, self.done = 0.0, False
        return result.observation["text"]

    def act(self, command: str) -> str:
        """Do one action in the room and see what happens.

        Args:
            command: `open <color> <thing>` to open a container, or `answer <code>` to give the gem's code.

        Returns:
            What the room shows after the action.
        """
        if self.done:
            raise ValueError("The episode is over.")
        result = self.client.step({"text": command})
        COUNTS["steps"] += 1
        if COUNTS["steps"] % 10 == 1:
            print(f"[trl_side] tool steps on the server: {COUNTS['steps']}", file=sys.stderr, flush=True)
        self.reward += float(result.reward or 0.0)
        self.done = bool(result.done)
        return result.observation["text"]

    def get_reward(self) -> float:
        if not self.done:
            result = self.client.step({"finish": True})
            COUNTS["finishes"] += 1
            self.reward += float(result.reward or 0.0)
            self.done = True
        return self.reward


def act(command: str) -> str:
    """Do one action in the room and see what happens.

    Args:
        command: `open <color> <thing>` to open a container, or `answer <code>` to give the gem's code.

    Returns:
        What the room shows after the action.
    """
    return command


def warm_start(model_dir: str, tokenizer, system: str, indices: list[int], epochs: int, threads: int) -> dict:
    """Next-token loss over the noisy solver's episodes as tool-call conversations; the model is saved in place."""
    import random

    import torch
    from transformers import AutoModelForCausalLM

    from loop_agents.envs.bundled.demonstrations import demonstration

    texts = []
    rng = random.Random(0)
    for index in indices:
        chat = demonstration(index, 0.3, rng)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": chat[1]["content"]}]
        for message in chat[2:]:
            if message["role"] == "assistant":
                call = {
                    "type": "function",
                    "function": {"name": "act", "arguments": {"command": message["content"]}},
                }
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            else:
                messages.append({"role": "tool", "name": "act", "content": message["content"]})
        texts.append(tokenizer.apply_chat_template(messages, tools=[act], tokenize=False))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    started, losses = time.perf_counter(), []
    for _ in range(epochs):
        order = list(range(len(texts)))
        rng.shuffle(order)
        for start in range(0, len(order), 16):
            batch = tokenizer(
                [texts[i] for i in order[start : start + 16]], return_tensors="pt", padding=True
            )
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            loss = model(**batch, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    model.save_pretrained(model_dir)
    return {
        "episodes": len(texts),
        "epochs": epochs,
        "final_loss": losses[-1],
        "seconds": time.perf_counter() - started,
    }


def main(spec_path: str) -> None:
    SPEC.update(json.loads(Path(spec_path).read_text()))
    import torch

    torch.set_num_threads(int(SPEC["threads"]))
    t_start = time.perf_counter()
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(SPEC["model_dir"])
    tokenizer.padding_side = "left"
    system = SPEC["system_prompt"] + " Act with the tool `act`, one command per call."
    warm = warm_start(SPEC["model_dir"], tokenizer, system, SPEC["warm_indices"], SPEC["warm_epochs"],
                      int(SPEC["threads"]))  # fmt: skip
    print(f"[trl_side] tool-call warm start: {warm}", file=sys.stderr, flush=True)
    data = Dataset.from_list(
        [
            {"prompt": [{"role": "system", "content": system}, {"role": "user", "content": ""}], "task_id": t}
            for t in SPEC["task_ids"]
        ]  # fmt: skip
    )
    k, steps = int(SPEC["group"]), int(SPEC["steps"])
    args = GRPOConfig(
        output_dir=SPEC["output_dir"],
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        learning_rate=float(SPEC["lr"]),
        lr_scheduler_type="constant",
        max_steps=steps,
        per_device_train_batch_size=int(SPEC["batch"]),
        num_generations=k,
        max_completion_length=int(SPEC["max_new_tokens"]),
        max_tool_calling_iterations=int(SPEC["max_turns"]),
        temperature=1.0,
        beta=0.0,
        loss_type="grpo",
        shuffle_dataset=False,
        use_vllm=False,
        dataloader_num_workers=0,
        model_init_kwargs={"dtype": torch.float32},
    )
    logs: list[dict] = []
    step_times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            step_times.append(time.perf_counter() - self.t0)
            print(
                f"[trl_side] step {state.global_step}: {step_times[-1]:.0f} s, {COUNTS}",
                file=sys.stderr,
                flush=True,
            )

        def on_log(self, a, state, control, logs_=None, **kw):
            logs.append(dict(kw.get("logs") or logs_ or {}))

    trainer = GRPOTrainer(
        model=SPEC["model_dir"],
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        environment_factory=GemHuntOpenEnv,
        peft_config=LoraConfig(
            r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
        ),  # fmt: skip
        callbacks=[Timer()],
    )
    t_train = time.perf_counter()
    output = trainer.train()
    result = {
        "steps": output.global_step,
        "train_loss": output.training_loss,
        "step_seconds": step_times,
        "setup_s": t_train - t_start,
        "train_s": time.perf_counter() - t_train,
        "openenv_calls": COUNTS,
        "warm_start": warm,
        "logs": logs,
    }
    print("TRL_OPENENV_RESULT " + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
