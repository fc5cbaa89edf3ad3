"""TRL trains on our families through its own environment contract: `GRPOTrainer(environment_factory=...)` with the
classes of `loop_agents.envs.trl` and no `reward_funcs` (each environment's `get_reward` scores its episode).

    python -m benchmarks.trl_environments [--steps 3] [--cases bundled appworld routed]

One process: TRL 1.16 (the `envs` extra's pin) with HF generation on the CPU, the tiny model built from scratch,
LoRA. Cases: `bundled` (the gem hunt), `appworld` (the real engine, its code sandboxed; the data root is built on
first use), `routed` (one run over bundled and textcraft, routed by the dataset's `environment` column). The tiny
model has never seen a tool call, so rewards are mostly those of episodes it did not play well: this records that
TRL's loop runs end to end on our environments (steps, seconds, the environment-owned reward, tool calls and
failures as TRL logs them, episodes per family), not learning. Writes `benchmarks/results/trl_environments.json`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from loop_agents.envs.trl import trl_environments

PROMPT = "Solve the task below. Act only through the tools, one call at a time."
CASES = {"bundled": {"bundled": []}, "appworld": {"appworld": []}, "routed": {"bundled": [], "textcraft": []}}


def count_resets(factories: dict[str, type]) -> dict[str, int]:
    """Wrap each class's `reset` to count the episodes TRL starts per family (the returned dict fills in)."""
    resets = {name: 0 for name in factories}
    for name, cls in factories.items():
        original = cls.reset

        def counted(
            self: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any
        ) -> str:
            resets[_name] += 1
            return _original(self, *args, **kwargs)

        cls.reset = counted
    return resets


def run_grpo(
    factories: dict[str, type], out_dir: Path, steps: int = 2, rows_per_family: int = 4, group: int = 2
) -> dict[str, Any]:
    """TRL's GRPOTrainer for `steps` optimizer steps over `factories` (one family: a single factory; several: routed
    by the `environment` column), on a tiny model built in `out_dir`; returns what TRL reported."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from loop_agents.tiny_model import build_tiny_model

    model_dir = build_tiny_model(out_dir / "model")
    resets = count_resets(factories)
    routed = len(factories) > 1
    rows = [
        {"prompt": [{"role": "user", "content": PROMPT}], **({"environment": name} if routed else {})}
        for name in factories
        for _ in range(rows_per_family)
    ]
    logs: list[dict] = []
    step_seconds: list[float] = []

    class Record(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            step_seconds.append(round(time.perf_counter() - self.started, 2))

        def on_log(self, args, state, control, logs_=None, **kwargs):
            logs.append(dict(kwargs.get("logs") or logs_ or {}))

    config = GRPOConfig(
        output_dir=str(out_dir / "trl"),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        max_steps=steps,
        per_device_train_batch_size=2 * group,
        num_generations=group,
        max_completion_length=48,
        max_tool_calling_iterations=2,
        beta=0.0,
        use_vllm=False,
        dataloader_num_workers=0,
        model_init_kwargs={"dtype": torch.float32},
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        args=config,
        train_dataset=Dataset.from_list(rows),
        environment_factory=factories if routed else next(iter(factories.values())),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"),
        callbacks=[Record()],
    )
    output = trainer.train()
    return {"steps": output.global_step, "step_seconds": step_seconds, "episodes": resets, "logs": logs}


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The numbers worth a line: per step, the environment-owned reward means and TRL's tool counters."""
    rows = [entry for entry in result["logs"] if "loss" in entry]
    keep = ("reward", "rewards/", "tools/", "num_tools")
    return {
        "steps": result["steps"],
        "step_seconds": result["step_seconds"],
        "episodes": result["episodes"],
        "per_step": [{k: v for k, v in row.items() if k.startswith(keep) or k == "loss"} for row in rows],
    }


def main() -> None:
    from benchmarks.runner import write_analysis

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--cases", nargs="+", choices=sorted(CASES), default=["bundled", "appworld", "routed"]
    )
    args = parser.parse_args()
    cases = {}
    for case in args.cases:
        with tempfile.TemporaryDirectory(prefix=f"trl_env_{case}_") as tmp:
            started = time.perf_counter()
            cases[case] = {**summary(run_grpo(trl_environments(CASES[case]), Path(tmp), steps=args.steps)),
                           "wall_s": round(time.perf_counter() - started, 1)}  # fmt: skip
        print(f"[trl_environments] {case}: {cases[case]['steps']} steps, episodes {cases[case]['episodes']}, "
              f"{cases[case]['wall_s']} s", flush=True)  # fmt: skip
    write_analysis("trl_environments", {"what": __doc__.split("\n\n")[0], "trl": "1.16.0", "cases": cases})


if __name__ == "__main__":
    main()
