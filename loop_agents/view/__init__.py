"""Trajectory viewer: a static, self-contained HTML site for one run directory.

    python -m loop_agents.view <run_dir> [--out DIR] [--tokenizer PATH] [--serve] [--force]

Run directory it reads (written by loop_agents.orchestration.run_log.RunLog):
    config.yaml                         composed config (shown collapsed on the index)
    metrics.jsonl                       one JSON object per iteration (and per evaluation), key "iteration"
    rollouts/iter_000001.jsonl          one Trajectory.to_dict() per line: the K rollouts of every task
    eval/<split>_iter_000005.jsonl      evaluation episodes (also accepted: eval/<split>/iter_000005.jsonl)
Fields used: task_id, group_id, sample_index, token_ids, loss_mask, sample_logprobs, turns (gen_start,
gen_end, action_text, observation_text, finish_reason, ...), messages, reward, success, reward_details
({"tests": [{"name" or "requirement", "passed", "message"}], "difficulty", "step_rewards", ...}),
finish_reason, advantage, metadata ({"filtered": True when LOOP's |A| filter dropped it, "error", ...}).

Site written (default <run_dir>/viewer/; no server, no CDN, inline CSS/JS, works from file://):
    index.html                          curves, one row per iteration / evaluation (reward, |A|-dropped
                                        fraction, TGC/SGC per difficulty, behaviour metrics), config
    iter_000001/index.html              task groups as rows of K rollout cards; filters (task, reward
                                        range, finish reason, kept/dropped, outcome) kept in the URL hash
    iter_000001/group_00000.html        one group: K rollouts side by side, turn i on row i (model code,
                                        environment output, logprob stats), per-test report, and with
                                        --tokenizer every token decoded alone, shaded by loss mask/logprob
    eval_<split>_iter_000005/...        the same for evaluation files
    manifest.json                       sizes/mtimes of rendered sources: unchanged files are skipped
Model output is untrusted: all text is HTML-escaped, and the script only ever sets textContent.
"""

from loop_agents.view.site import build_site

__all__ = ["build_site"]
