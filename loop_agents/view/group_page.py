"""One task group on one page: its K rollouts side by side, turn i of every rollout on the same row."""

from __future__ import annotations

from typing import Any

from loop_agents.eval.behaviour import trajectory_behaviour
from loop_agents.rollout.trajectory import Trajectory, Turn
from loop_agents.view.html import badge, esc, fmt, json_script, key_values, page
from loop_agents.view.tokens import TokenDecoder, span_logprob_stats, token_view_data


def render_group_page(
    group_id: str,
    members: list[Trajectory],
    decoder: TokenDecoder | None,
    crumbs: list[tuple[str, str | None]],
) -> str:
    """The full page of one group: prompt, per-rollout headers and tests, aligned turns, token views."""
    columns = len(members)
    cells = [_header_cell(t) for t in members]
    cells += [_tests_cell(t) for t in members]
    if decoder is not None:
        cells += [_tokens_cell(t, i, decoder) for i, t in enumerate(members)]
    for turn_index in range(max((len(t.turns) for t in members), default=0)):
        for traj in members:
            if turn_index < len(traj.turns):
                cells.append(_turn_cell(traj, turn_index, traj.turns[turn_index]))
            else:
                cells.append('<div class="cell empty"></div>')
    if not any(t.turns for t in members):
        cells += [_messages_cell(t) for t in members]
    grid = (
        f'<div class="grid" style="grid-template-columns: repeat({columns}, minmax(360px, 1fr))">'
        + "".join(cells)
        + "</div>"
    )
    task_ids = sorted({t.task_id for t in members})
    body = (
        f"<p>task {' '.join(badge(t) for t in task_ids)} · {columns} rollouts · "
        f"reward mean {fmt(sum(t.reward for t in members) / max(columns, 1))}</p>"
        + _prompt_block(members[0])
        + grid
    )
    return page(f"group {group_id}", body, crumbs)


def _prompt_block(traj: Trajectory) -> str:
    prompt = []
    for message in traj.messages:
        if message.get("role") == "assistant":
            break
        prompt.append(message)
    if not prompt:
        return ""
    parts = "".join(
        f'<div class="turnhead">{esc(m.get("role", "?"))}</div><pre>{esc(m.get("content", ""))}</pre>'
        for m in prompt
    )
    return (
        f"<details><summary>prompt ({len(prompt)} messages, shared by the group)</summary>{parts}</details>"
    )


def _header_cell(traj: Trajectory) -> str:
    behaviour = trajectory_behaviour(traj)
    status = '<span class="ok">success</span>' if traj.success else '<span class="bad">failure</span>'
    flags = [badge(f"finish: {traj.finish_reason.value}")]
    if "filtered" in traj.metadata:
        flags.append(
            badge("dropped by |A| filter", "dropped") if traj.metadata["filtered"] else badge("kept", "kept")
        )
    flags += _behaviour_badges(behaviour)
    details = {k: v for k, v in traj.metadata.items() if k not in ("old_logprobs",)}
    return (
        f'<div class="cell header" data-sample="{traj.sample_index}">'
        f"<h3>sample {traj.sample_index} · {status}</h3>"
        f'<div>reward <b class="reward">{esc(fmt(traj.reward))}</b> · advantage <b>{esc(fmt(traj.advantage))}</b></div>'
        f"<div>{len(traj.turns)} turns · {traj.num_generated_tokens} generated / {traj.num_tokens} tokens"
        f" · policy v{esc(fmt(traj.policy_version))}</div>"
        f"<div>{''.join(flags)}</div>"
        f"<details><summary>metadata and timings</summary>{key_values({**details, **traj.timings})}</details>"
        "</div>"
    )


def _behaviour_badges(behaviour: Any) -> list[str]:
    shown = []
    if behaviour.multi_code_cell_turns:
        shown.append(badge(f"{behaviour.multi_code_cell_turns} multi-cell turns", "warn"))
    if behaviour.api_doc_lookups:
        shown.append(badge(f"{behaviour.api_doc_lookups} doc lookups"))
    if behaviour.assum_mentions:
        shown.append(badge(f"assum ×{behaviour.assum_mentions}", "warn"))
    if behaviour.dummy_mentions:
        shown.append(badge(f"dummy ×{behaviour.dummy_mentions}", "warn"))
    if behaviour.gave_up:
        shown.append(badge("gave up", "dropped"))
    return shown


def _tests_cell(traj: Trajectory) -> str:
    details = dict(traj.reward_details)
    tests = details.pop("tests", None)
    body = ""
    if isinstance(tests, list) and tests:
        passed = sum(bool(t.get("passed")) for t in tests if isinstance(t, dict))
        items = []
        for test in tests:
            if not isinstance(test, dict):
                items.append(f"<li>{esc(test)}</li>")
                continue
            name = test.get("name", test.get("requirement", "?"))
            mark = '<span class="ok">✓</span>' if test.get("passed") else '<span class="bad">✗</span>'
            message = test.get("message") or ""
            extra = f"<pre>{esc(message)}</pre>" if message else ""
            items.append(
                f'<li class="test" data-passed="{int(bool(test.get("passed")))}">{mark} {esc(name)}{extra}</li>'
            )
        body += f'<div>tests passed {passed} / {len(tests)}</div><ul class="tests">{"".join(items)}</ul>'
    else:
        body += '<div class="muted">no per-test report</div>'
    details.pop("step_rewards", None)
    if details:
        body += f"<details><summary>reward details</summary>{key_values(details)}</details>"
    return f'<div class="cell tests">{body}</div>'


def _tokens_cell(traj: Trajectory, column: int, decoder: TokenDecoder) -> str:
    element_id = f"tokens-{column}"
    legend = (
        '<div class="legend muted"><span><span class="tok ctx">grey</span>: context, loss mask 0</span>'
        '<span><span class="tok gen">underlined</span>: trained (mask 1), redder = lower sampling probability</span>'
        "</div>"
    )
    return (
        f'<div class="cell"><details class="tokens" data-src="{element_id}">'
        f"<summary>tokens ({traj.num_tokens}) shaded by loss mask and logprob</summary>"
        f'{legend}<div class="tokview"></div></details>{json_script(element_id, token_view_data(traj, decoder))}</div>'
    )


def _turn_cell(traj: Trajectory, index: int, turn: Turn) -> str:
    stats = span_logprob_stats(traj, turn.gen_start, turn.gen_end)
    head = [f"turn {index + 1}", f"{turn.gen_end - turn.gen_start} tokens", f"stop: {turn.finish_reason}"]
    if stats:
        head.append(f"logprob mean {stats['mean']:.3f}, min {stats['min']:.3f}")
    step_rewards = traj.reward_details.get("step_rewards")
    if isinstance(step_rewards, list) and index < len(step_rewards):
        head.append(f"step reward {fmt(step_rewards[index])}")
    head.append(f"gen {turn.generate_s:.2f}s · env {turn.env_s:.2f}s")
    error = f'<div class="bad">{esc(turn.action_error)}</div>' if turn.action_error else ""
    truncated = " (truncated)" if turn.observation_truncated else ""
    return (
        f'<div class="cell turn" data-turn="{index}"><div class="turnhead">{esc(" · ".join(head))}</div>'
        f'<pre class="code">{esc(turn.action_text)}</pre>{error}'
        f'<div class="turnhead">environment{truncated}</div><pre class="obs">{esc(turn.observation_text)}</pre></div>'
    )


def _messages_cell(traj: Trajectory) -> str:
    parts = "".join(
        f'<div class="turnhead">{esc(m.get("role", "?"))}</div><pre>{esc(m.get("content", ""))}</pre>'
        for m in traj.messages
    )
    return f'<div class="cell">{parts or "<span class=muted>no messages</span>"}</div>'
