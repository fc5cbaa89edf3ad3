"""The page of one iteration (or evaluation): every task group as a row of K rollout cards, with filters."""

from __future__ import annotations

from typing import Any

from loop_agents.eval.behaviour import trajectory_behaviour
from loop_agents.rollout.trajectory import FinishReason, Trajectory
from loop_agents.view.html import badge, esc, fmt, key_values, page


def group_file_name(index: int) -> str:
    return f"group_{index:05d}.html"


def render_episodes_page(
    title: str,
    groups: dict[str, list[Trajectory]],
    summary: dict[str, Any],
    metrics_row: dict[str, Any] | None,
    crumbs: list[tuple[str, str | None]],
) -> str:
    """Filter bar, summary tables, then one section per group linking to its group page."""
    sections = [_group_section(i, gid, members) for i, (gid, members) in enumerate(groups.items())]
    finishes = sorted(
        {t.finish_reason.value for ts in groups.values() for t in ts} | {r.value for r in FinishReason}
    )
    body = (
        _filter_bar(finishes)
        + f"<details><summary>summary of this file</summary>{key_values(summary)}</details>"
        + (f"<details><summary>training metrics of this iteration</summary>{key_values(metrics_row)}</details>"
           if metrics_row else "")
        + "".join(sections)
    )  # fmt: skip
    return page(title, body, crumbs)


def _filter_bar(finish_reasons: list[str]) -> str:
    options = '<option value="">any</option>' + "".join(
        f'<option value="{esc(r)}">{esc(r)}</option>' for r in finish_reasons
    )
    return (
        '<div id="filters">'
        '<label>task <input type="text" id="f-task" placeholder="task or group id contains"></label>'
        '<label>reward ≥ <input type="number" id="f-rmin" step="any"></label>'
        '<label>reward ≤ <input type="number" id="f-rmax" step="any"></label>'
        f'<label>finish <select id="f-finish">{options}</select></label>'
        '<label>|A| filter <select id="f-kept"><option value="">any</option>'
        '<option value="0">kept</option><option value="1">dropped</option></select></label>'
        '<label>outcome <select id="f-success"><option value="">any</option>'
        '<option value="1">success</option><option value="0">failure</option></select></label>'
        '<button type="button" id="f-reset">reset</button><span id="f-count" class="muted"></span>'
        "</div>"
    )


def _group_section(index: int, group_id: str, members: list[Trajectory]) -> str:
    rewards = [t.reward for t in members]
    mean = sum(rewards) / len(rewards)
    spread = max(rewards) - min(rewards)
    task_ids = sorted({t.task_id for t in members})
    search = " ".join([group_id, *task_ids]).lower()
    href = group_file_name(index)
    cards = "".join(_card(t, href) for t in members)
    flat = (
        ' <span class="badge warn">all rewards equal: no learning signal</span>'
        if spread == 0 and len(members) > 1
        else ""
    )
    return (
        f'<section class="group" data-group="{esc(group_id)}" data-search="{esc(search)}">'
        f'<h3><a href="{href}">{esc(", ".join(task_ids))}</a> <span class="muted">group {esc(group_id)}</span></h3>'
        f'<div class="muted">{len(members)} rollouts · reward mean {fmt(mean)} · spread {fmt(spread)}{flat}</div>'
        f'<div class="cards">{cards}</div></section>'
    )


def _card(traj: Trajectory, href: str) -> str:
    behaviour = trajectory_behaviour(traj)
    filtered = traj.metadata.get("filtered")
    filter_badge = (
        "" if filtered is None else (badge("dropped", "dropped") if filtered else badge("kept", "kept"))
    )
    tests = traj.reward_details.get("tests")
    tests_line = ""
    if isinstance(tests, list) and tests:
        passed = sum(bool(t.get("passed")) for t in tests if isinstance(t, dict))
        tests_line = f"<div>tests {passed}/{len(tests)}</div>"
    flags = []
    if behaviour.multi_code_cell_turns:
        flags.append(badge(f"multi-cell ×{behaviour.multi_code_cell_turns}", "warn"))
    if behaviour.gave_up:
        flags.append(badge("gave up", "dropped"))
    if traj.metadata.get("error"):
        flags.append(badge("error", "dropped"))
    outcome = "success" if traj.success else "failure"
    return (
        f'<a class="card {outcome}" href="{href}" data-reward="{traj.reward!r}" '
        f'data-finish="{esc(traj.finish_reason.value)}" data-filtered="{"" if filtered is None else int(bool(filtered))}" '
        f'data-success="{int(bool(traj.success))}" data-sample="{traj.sample_index}">'
        f'<div>#{traj.sample_index} <span class="reward">{esc(fmt(traj.reward))}</span> {filter_badge}</div>'
        f"<div>A = {esc(fmt(traj.advantage))}</div>"
        f"<div>{len(traj.turns)} turns · {traj.num_generated_tokens} gen tok</div>"
        f'<div class="muted">{esc(traj.finish_reason.value)}</div>{tests_line}<div>{"".join(flags)}</div></a>'
    )
