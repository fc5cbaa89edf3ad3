"""Cost of building a trajectory turn by turn: 16 vs 128 turns (goal: ratio <= 10, i.e. linear).

Runs the real episode runner (`run_episode`) with an instant policy (fixed sampled ids, ~150 per
turn) and an instant environment (a different ~300-token code-execution output per turn), so that
the time measured is only ours: template rendering, observation truncation and tokenization,
decoding the sampled ids, action parsing and the trajectory appends. For comparison it also times
what ml-loop / AgentGym-RL do: re-render and re-tokenize the whole conversation with the chat
template every turn (O(turns^2); 56% of rollout time at 128 turns in the reference).

    .venv/bin/python benchmarks/trajectory_build.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time

from transformers import AutoTokenizer

from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.inference.protocol import Completion, SamplingParams
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.environment import Evaluation, ResetResult, StepResult
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.tiny_model import build_tiny_model

ANSWER = (
    "The songs are paginated, so I will collect every page before counting.\n\n```python\n"
    "songs = []\npage_index = 0\nwhile True:\n    page = apis.spotify.show_playlist(\n"
    "        access_token=spotify_access_token, playlist_id=playlist_id, page_index=page_index, page_limit=20\n"
    "    )\n    if not page:\n        break\n    songs.extend(page)\n    page_index += 1\nprint(len(songs))\n```"
)


class InstantPolicy:
    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Completion:
        ids = self.ids[: params.max_tokens]
        return Completion(token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop")


class InstantEnv:
    def __init__(self) -> None:
        self.turn = 0

    async def reset(self, task_id: str) -> ResetResult:
        supervisor = {"first_name": "Sam", "last_name": "Lee", "email": "sam@x.com", "phone_number": "123"}
        return ResetResult(
            "", {"instruction": "Count my songs.", "supervisor": supervisor, "datetime": "2023-05-18"}
        )

    async def step(self, action: str) -> StepResult:
        self.turn += 1
        rows = [
            {"song_id": self.turn * 100 + i, "title": f"Song {i} of turn {self.turn}", "liked": i % 2 == 0}
            for i in range(12)
        ]
        return StepResult(json.dumps(rows, indent=1), done=False)

    async def evaluate(self) -> Evaluation:
        return Evaluation(0.0, False)

    async def close(self) -> None:
        return None


def build_once(tokenizer, turns: int) -> tuple[float, int]:
    cfg = EpisodeConfig(
        max_turns=turns, max_tokens_per_turn=4096, max_context_tokens=10**6, observation_max_tokens=3000
    )
    chat = chat_format(tokenizer, cfg)
    policy = InstantPolicy(chat.encode(ANSWER) + [chat.turn_end_id])
    started = time.perf_counter()
    traj = asyncio.run(run_episode(InstantEnv(), policy, AppWorldAgent(), chat, cfg, task_id="bench"))
    elapsed = time.perf_counter() - started
    assert len(traj.turns) == turns, traj.finish_reason
    return elapsed, traj.num_tokens


def rerender_once(tokenizer, turns: int) -> float:
    """The reference's way: apply_chat_template over the whole history before every turn."""
    cfg = EpisodeConfig(max_turns=turns, max_tokens_per_turn=4096, max_context_tokens=10**6)
    chat = chat_format(tokenizer, cfg)
    policy = InstantPolicy(chat.encode(ANSWER) + [chat.turn_end_id])
    traj = asyncio.run(run_episode(InstantEnv(), policy, AppWorldAgent(), chat, cfg, task_id="bench"))
    started = time.perf_counter()
    for n in range(len(traj.messages) + 1):
        tokenizer.apply_chat_template(
            traj.messages[:n] or traj.messages[:1], tokenize=True, add_generation_prompt=True
        )
    return time.perf_counter() - started


def run(repeats: int = 3, verbose: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(tmp))
    build_once(tokenizer, 4)  # warm-up (template compilation, tokenizer caches)
    result = {}
    for turns in (16, 128):
        times, tokens = [], 0
        for _ in range(repeats):
            elapsed, tokens = build_once(tokenizer, turns)
            times.append(elapsed)
        rerender = rerender_once(tokenizer, turns)
        result[turns] = {"median_s": statistics.median(times), "tokens": tokens, "rerender_s": rerender}
        if verbose:
            print(
                f"{turns:4d} turns: {tokens:7d} tokens, build {statistics.median(times) * 1e3:8.1f} ms "
                f"({statistics.median(times) / turns * 1e3:.2f} ms/turn); whole-template re-render each turn "
                f"{rerender * 1e3:9.1f} ms"
            )
    ratio = result[128]["median_s"] / result[16]["median_s"]
    naive = result[128]["rerender_s"] / result[16]["rerender_s"]
    if verbose:
        print(f"ratio 128/16 turns: {ratio:.1f} (goal <= 10; 8 = linear); re-render approach: {naive:.1f}")
    return {
        "ratio": round(ratio, 3),
        "rerender_ratio": round(naive, 3),
        "turns_16": result[16],
        "turns_128": result[128],
        "repeats": repeats,
    }


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run trajectory_build`."""
    r = run(repeats=1 if quick else 3)
    t16, t128 = r["turns_16"], r["turns_128"]
    return {
        **r,
        "ratio_definition": "median build time of a 128-turn episode / of a 16-turn episode (8 = linear)",
        "summary": f"16 turns {t16['median_s'] * 1e3:.0f} ms vs 128 turns {t128['median_s'] * 1e3:.0f} ms "
        f"({t128['tokens']} tokens); re-render-every-turn approach: {r['rerender_ratio']:.0f}x",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    run(args.repeats)


if __name__ == "__main__":
    main()
