"""Does the policy copy the task's own values (tag, name, date, amount) from the instruction? (issue 19)

Two measures on the self-made AppWorld data (the scripts know each task's values, `demos/episodes.task_literals`):
- `--model DIR`: teacher-forced on the clean scripted episodes of a split (dev: held out), the top-1 accuracy of
  the tokens that spell the values, of the first token after each value's opening quote (the choice of the
  value; the rest is mostly completion), overall and per slot (tag, project, friend, date ...), and the share of
  episodes whose value tokens are all right;
- `--run DIR`: in a training run's saved evaluation episodes (`eval/<split>/iter_*.jsonl`), the share of the
  task's values that appear verbatim in the code the policy wrote, per evaluated iteration, beside its TGC and
  the success rate of each scenario family (which families RL added or lost).

Usage: .venv/bin/python benchmarks/appworld_value_copying.py --root <data root> [--model DIR] [--run DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def teacher_forced(model_dir: str, root: Path, split: str) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from loop_agents.config.load import compose
    from loop_agents.envs.appworld.demos.episodes import task_values
    from loop_agents.envs.appworld.demos.scripted import written_value
    from loop_agents.envs.appworld.demos.warm_start import appworld_demonstrations
    from loop_agents.envs.appworld.literal_weights import literal_token_positions
    from loop_agents.envs.selected import make_agent
    from loop_agents.envs.settings import env_settings
    from loop_agents.rollout.chat import ChatFormat
    from loop_agents.rollout.demonstration import demonstration_trajectory

    cfg = compose(["experiment=appworld_demo", f"env.options.root={root}", "env.options.demo_noise=0"])
    chat = ChatFormat(AutoTokenizer.from_pretrained(model_dir))
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    demos = appworld_demonstrations(env_settings(cfg), make_agent(cfg), split, cut=lambda text: text)
    tokens = right = firsts = firsts_right = episodes_right = 0
    by_slot: dict[str, list[bool]] = {}
    with torch.no_grad():
        for task_id, messages in demos.demonstrations:
            traj = demonstration_trajectory(chat, messages, task_id)
            literals = {
                slot: written_value(slot, value) for slot, value in task_values(root, task_id).items()
            }
            positions = literal_token_positions(traj, chat, list(literals.values()))
            logits = model(input_ids=torch.tensor([traj.token_ids])).logits[0]
            for slot, literal in literals.items():
                spelled = literal_token_positions(traj, chat, [literal])
                if len(spelled) > 1:  # its first token after the opening quote or the number's first
                    hit = int(logits[spelled[1] - 1].argmax()) == traj.token_ids[spelled[1]]
                    by_slot.setdefault(slot, []).append(hit)
            all_right, previous, index = True, -2, 0
            for position in positions:
                index = index + 1 if position == previous + 1 else 0
                hit = int(logits[position - 1].argmax()) == traj.token_ids[position]
                tokens, right, all_right = tokens + 1, right + hit, all_right and hit
                if index == 1:  # the token after the opening quote (or the number's first digit's follower)
                    firsts, firsts_right = firsts + 1, firsts_right + hit
                previous = position
            episodes_right += all_right
    n = len(demos.demonstrations)
    return {"episodes": n, "value_tokens_top1": right / tokens, "value_choice_top1": firsts_right / firsts,
            "episodes_all_values_top1": episodes_right / n,
            "value_choice_top1_by_slot": {slot: sum(hits) / len(hits) for slot, hits in sorted(by_slot.items())}}  # fmt: skip


def value_spellings(root: Path, family: str, task_id: str) -> list[set[str]]:
    """Per value of the task, the spellings that count as copied: as the scripts write it (a date in the
    instruction's words since 2026-11-26) or its `repr` (the ISO date the earlier scripts wrote)."""
    from loop_agents.envs.appworld.demos.episodes import task_values
    from loop_agents.envs.appworld.demos.scripted import written_value

    return [
        {written_value(slot, value), repr(value)}
        for slot, value in task_values(root, task_id, family).items()
    ]


def copied_in_run(run_dir: Path, root: Path, split: str) -> list[dict[str, float]]:
    from loop_agents.envs.appworld.demos.episodes import scenario_families
    from loop_agents.envs.appworld.splits import scenario_of

    families = scenario_families(root)
    rows = []
    for path in sorted((run_dir / "eval" / split).glob("iter_*.jsonl")):
        episodes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        values = copied = all_copied = 0
        by_family: dict[str, list[bool]] = {}
        for episode in episodes:
            family = families[scenario_of(episode["task_id"])]
            by_family.setdefault(family, []).append(bool(episode["success"]))
            code = "\n".join(m["content"] for m in episode["messages"] if m["role"] == "assistant")
            spellings = value_spellings(root, family, episode["task_id"])
            hits = sum(any(spelling in code for spelling in value) for value in spellings)
            values, copied, all_copied = (
                values + len(spellings),
                copied + hits,
                all_copied + (hits == len(spellings)),
            )
        rows.append({"iteration": int(path.stem.split("_")[1]), "values_copied": copied / values,
                     "episodes_all_copied": all_copied / len(episodes),
                     "tgc": sum(e["success"] for e in episodes) / len(episodes),
                     "success_by_family": {f: sum(v) / len(v) for f, v in sorted(by_family.items())}})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the self-made AppWorld data root")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--model", help="a model directory (e.g. <run>/warm_model)")
    parser.add_argument("--run", help="a training run directory")
    args = parser.parse_args()
    torch.set_num_threads(2)
    root = Path(args.root).resolve()
    if args.model:
        print(json.dumps({"model": args.model, **teacher_forced(args.model, root, args.split)}))
    if args.run:
        for row in copied_in_run(Path(args.run), root, args.split):
            print(json.dumps({"run": args.run, **row}))


if __name__ == "__main__":
    main()
