"""Episodes end to end: a real code-execution environment, scripted and real (HF) policies, failures."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.appworld.agent import NO_CODE_FEEDBACK, AppWorldAgent
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.environment import ResetResult
from loop_agents.rollout.observation import TRUNCATION_NOTE
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.trajectory import FinishReason, Trajectory, load_trajectories, save_trajectories

from .repl_env import GuessNumberEnv, PythonReplEnv
from .scripted import FailingGenerator, ScriptedGenerator, assert_token_exact

CFG = EpisodeConfig(
    max_tokens_per_turn=256, max_turns=6, max_context_tokens=16384, observation_max_tokens=200
)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def qwen3_tokenizer(tiny_qwen3_model_dir):
    return AutoTokenizer.from_pretrained(tiny_qwen3_model_dir)


def scripted(chat, texts: list[str], end: bool = True) -> ScriptedGenerator:
    return ScriptedGenerator([chat.encode(t) + ([chat.turn_end_id] if end else []) for t in texts])


def play(env, generator, agent, chat, cfg=CFG, task_id="sum:10", **kwargs) -> Trajectory:
    return asyncio.run(run_episode(env, generator, agent, chat, cfg, task_id=task_id, **kwargs))


def test_code_agent_solves_a_task_and_the_ids_are_the_template_of_the_conversation(tokenizer):
    chat = chat_format(tokenizer, CFG)
    generator = scripted(
        chat,
        [
            "Let me compute it.\n\n```python\ntotal = sum(range(11))\nprint(total)\n```",
            "```python\napis.supervisor.complete_task(answer=total)\n```",
        ],
    )
    traj = play(PythonReplEnv(), generator, AppWorldAgent(), chat, group_id="g1", sample_index=2)
    assert traj.finish_reason is FinishReason.DONE
    assert (traj.reward, traj.success, traj.group_id, traj.sample_index) == (1.0, True, "g1", 2)
    assert [t.observation_text for t in traj.turns] == ["55\n", "Marked the active task complete.\n"]
    assert (
        traj.turns[0].observation_start > 0 and traj.turns[1].observation_start == -1
    )  # last one not appended
    assert_token_exact(traj, generator)
    # canonical sampled ids + Qwen2.5: the sequence is exactly the template applied to the conversation
    whole = tokenizer.apply_chat_template(traj.messages, tokenize=True)["input_ids"]
    assert traj.token_ids == whole
    assert traj.messages[-2]["content"].startswith("Output:\n```\n55\n```\n\nAs a reminder:\n")
    assert traj.timings["total_s"] >= traj.timings["env_s"] > 0
    assert traj.last_trainable_index() == traj.turns[-1].gen_end - 1


def test_garbage_model_output_gives_error_observations_not_crashes(tokenizer):
    chat = chat_format(tokenizer, CFG)
    byte_c3 = tokenizer.convert_tokens_to_ids("Ã")  # byte 0xC3 alone: the first half of a UTF-8 character
    turns = [
        chat.encode("The answer is 55, no code needed.") + [chat.turn_end_id],
        chat.encode("```python\nprint('unterminated)\n```") + [chat.turn_end_id],
        chat.encode("```python\nprint('x' * 100_000)\n```") + [chat.turn_end_id],
        [byte_c3, byte_c3, *chat.encode("```python\nprint(1/0)\n```"), byte_c3, chat.turn_end_id],
        chat.encode("```python\nprint('cut before the fence closes')\n" + "y = 1\n" * 200),  # hits max_tokens
    ]
    generator = ScriptedGenerator(turns)
    cfg = replace(CFG, max_turns=5, max_tokens_per_turn=64)
    traj = play(PythonReplEnv(), generator, AppWorldAgent(), chat, cfg=cfg)
    assert traj.finish_reason is FinishReason.TURN_BUDGET
    assert (traj.reward, traj.success) == (0.0, False)
    t = traj.turns
    assert t[0].action_error == NO_CODE_FEEDBACK and t[0].env_s == 0.0
    assert "Execution failed" in t[1].observation_text and "SyntaxError" in t[1].observation_text
    assert len(t[2].observation_text) == 100_001 and t[2].observation_truncated
    obs_ids = traj.token_ids[t[2].observation_start : t[2].observation_end]
    reset = asyncio.run(_reset_info(PythonReplEnv(), "sum:10"))
    overhead = len(chat.observation_ids(AppWorldAgent().format_observation("", reset)))  # template, reminder
    assert cfg.observation_max_tokens * 0.8 < len(obs_ids) - overhead <= cfg.observation_max_tokens + 2
    assert TRUNCATION_NOTE in tokenizer.decode(obs_ids)
    answers = [m["content"] for m in traj.messages if m["role"] == "assistant"][-5:]
    assert answers[3].startswith("\ufffd") and answers[3].endswith("\ufffd")  # invalid UTF-8 pieces decoded
    assert "ZeroDivisionError" in t[3].observation_text
    assert t[4].finish_reason == "length" and t[4].action_error == NO_CODE_FEEDBACK
    # the cut turn is closed with <|im_end|> as context (mask 0), never as a trained token
    assert traj.token_ids[t[4].gen_end] == chat.turn_end_id and traj.loss_mask[t[4].gen_end] == 0
    assert traj.metadata["n_no_action"] == 2
    assert_token_exact(traj, generator)


def test_qwen3_code_inside_thinking_is_not_executed(qwen3_tokenizer):
    cfg = replace(CFG, enable_thinking=True, max_turns=2)
    chat = chat_format(qwen3_tokenizer, cfg)
    generator = scripted(
        chat,
        [
            "<think>\n```python\napis.supervisor.complete_task(answer=55)\n```\n</think>\n\n"
            "```python\nprint('after thinking')\n```",
            "<think>\nstill thinking and cut",
        ],
    )
    traj = play(PythonReplEnv(), generator, AppWorldAgent(), chat, cfg=cfg)
    assert traj.turns[0].observation_text == "after thinking\n"
    assert traj.turns[1].action_error is not None and "</think>" in traj.turns[1].action_error
    assert traj.finish_reason is FinishReason.TURN_BUDGET and not traj.success
    assert_token_exact(traj, generator)


def test_text_agent_plays_a_text_game(tokenizer):
    cfg = replace(CFG, max_turns=5)
    chat = chat_format(tokenizer, cfg)
    generator = scripted(chat, ["I guess low.\nAction: 3", "hmm", "Action: 8", "Action: 7"])
    agent = TextActionAgent(action_regex=r"Action:\s*(\S+)")
    traj = play(GuessNumberEnv(), generator, agent, chat, cfg=cfg, task_id="guess:7")
    assert traj.finish_reason is FinishReason.DONE
    assert [t.action_text for t in traj.turns] == ["3", "", "8", "7"]
    assert [t.observation_text.split(":")[0] for t in traj.turns][::2] == ["Higher.", "Lower."]
    assert traj.turns[1].action_error is not None
    assert traj.reward == pytest.approx(0.8) and traj.success  # 3 env guesses: 1 - 0.1 * 2
    assert traj.messages[0] == {"role": "system", "content": "You play a guessing game."}
    assert traj.reward_details["step_rewards"] == [0.0, 0.0, 1.0]
    assert_token_exact(traj, generator)


def test_environment_crash_and_timeout_end_the_episode_with_env_error(tokenizer):
    chat = chat_format(tokenizer, CFG)
    env = PythonReplEnv()
    traj = play(env, scripted(chat, ["```python\nimport os\nos._exit(3)\n```"]), AppWorldAgent(), chat)
    assert traj.finish_reason is FinishReason.ENV_ERROR and "died" in traj.metadata["error"]
    assert env.process is None  # closed
    env = PythonReplEnv(timeout_s=0.5)
    traj = play(env, scripted(chat, ["```python\nwhile True:\n    pass\n```"]), AppWorldAgent(), chat)
    assert traj.finish_reason is FinishReason.ENV_ERROR and "did not answer" in traj.metadata["error"]
    traj = play(PythonReplEnv(), scripted(chat, ["x"]), AppWorldAgent(), chat, task_id="no-such-task")
    assert traj.finish_reason is FinishReason.ENV_ERROR and traj.num_tokens == 0
    traj = play(GuessNumberEnv(), scripted(chat, ["x"]), AppWorldAgent(), chat, task_id="guess:1")
    assert (
        traj.finish_reason is FinishReason.ENV_ERROR
        and "lacks ['instruction', 'supervisor']" in traj.metadata["error"]
    )


def test_inference_failures_are_retried_then_end_the_episode(tokenizer):
    cfg = replace(CFG, inference_retries=2, inference_retry_backoff_s=0.01, max_turns=1)
    chat = chat_format(tokenizer, cfg)
    flaky = FailingGenerator(scripted(chat, ["```python\nprint(2)\n```"]), failures=2)
    traj = play(PythonReplEnv(), flaky, AppWorldAgent(), chat, cfg=cfg)
    assert traj.finish_reason is FinishReason.TURN_BUDGET and traj.metadata["inference_retries"] == 2
    dead = FailingGenerator(scripted(chat, ["x"]), failures=3)
    traj = play(PythonReplEnv(), dead, AppWorldAgent(), chat, cfg=cfg)
    assert traj.finish_reason is FinishReason.INFERENCE_ERROR and dead.calls == 3
    assert "3 attempts failed" in traj.metadata["error"] and traj.num_generated_tokens == 0


def test_context_budget_bounds_every_episode(tokenizer):
    chat = chat_format(tokenizer, CFG)
    agent = AppWorldAgent()
    reset = asyncio.run(_reset_info(PythonReplEnv(), "sum:10"))
    prompt_len = len(chat.initial_ids(agent.initial_messages(reset)))
    cfg = replace(CFG, max_context_tokens=prompt_len + 150, max_tokens_per_turn=100, max_turns=10)
    generator = scripted(chat, ["```python\nprint('" + "z" * 60 + "')\n```"])
    traj = play(PythonReplEnv(), generator, agent, chat, cfg=cfg)
    assert traj.finish_reason is FinishReason.CONTEXT_BUDGET
    assert traj.num_tokens <= cfg.max_context_tokens
    for prompt, params in zip(generator.prompts, generator.params, strict=True):
        assert len(prompt) + params.max_tokens <= cfg.max_context_tokens  # generation limit == training limit
    too_small = replace(cfg, max_context_tokens=prompt_len + 5)
    traj = play(PythonReplEnv(), generator, agent, chat, cfg=too_small)
    assert traj.finish_reason is FinishReason.CONTEXT_BUDGET and traj.num_tokens == 0 and not traj.turns


async def _reset_info(env, task_id) -> ResetResult:
    try:
        return await env.reset(task_id)
    finally:
        await env.close()


def test_cancellation_propagates_after_closing_the_environment(tokenizer):
    chat = chat_format(tokenizer, CFG)
    env = PythonReplEnv()

    class Hanging:
        started = asyncio.Event()

        async def generate(self, prompt_ids, params):
            self.started.set()
            await asyncio.Event().wait()

    async def main():
        generator = Hanging()
        task = asyncio.create_task(run_episode(env, generator, AppWorldAgent(), chat, CFG, task_id="sum:3"))
        await generator.started.wait()
        assert env.process is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert env.process is None


def test_trajectory_json_round_trip(tokenizer, tmp_path):
    chat = chat_format(tokenizer, CFG)
    generator = scripted(
        chat, ["```python\nprint('é 🙂 \"q\"')\n```", "```python\napis.supervisor.complete_task(1)\n```"]
    )
    traj = play(PythonReplEnv(), generator, AppWorldAgent(), chat, task_id="sum:1")
    traj.advantage = 0.25
    save_trajectories(tmp_path / "t.jsonl", [traj, traj])
    loaded = load_trajectories(tmp_path / "t.jsonl")
    assert loaded == [traj, traj]
    assert (
        loaded[0].finish_reason is FinishReason.DONE and loaded[0].turns[0].observation_text == 'é 🙂 "q"\n'
    )


class _HungStepEnv(GuessNumberEnv):
    """The text game whose step never returns (a family's step that hangs: it awaits what never comes)."""

    async def step(self, action: str):
        await asyncio.Event().wait()


def test_a_step_that_hangs_ends_at_the_step_timeout(tokenizer):
    from loop_agents.config.load import compose
    from loop_agents.orchestration.collector import loss_cause
    from loop_agents.orchestration.components import episode_config

    defaults = episode_config(compose([]), max_turns=4)
    assert (defaults.env_timeout_s, defaults.env_reset_timeout_s) == (
        120.0,
        900.0,
    )  # every run has a step timeout
    cfg = replace(CFG, env_timeout_s=0.5)
    chat = chat_format(tokenizer, cfg)
    traj = play(_HungStepEnv(), scripted(chat, ["5"]), TextActionAgent(), chat, cfg=cfg, task_id="guess:3")
    assert (
        traj.finish_reason is FinishReason.ENV_ERROR
        and traj.metadata["error"] == "step timed out after 0.5 s"
    )
    assert loss_cause(traj) == "env_timeout" and traj.timings["total_s"] < 5
