"""The viewer in a real headless Chromium: filters hide the right rows, tokens render, no script errors.

Filters are driven through the URL hash, which the page reads into the filter inputs and applies
with the same code the inputs' events call. Needs Debian's `chromium` (apt-get install -y chromium).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from loop_agents.rollout.trajectory import load_trajectories
from tests.view.dom import parse
from tests.view.run_factory import TASKS, XSS_TEXT, K

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="headless browser test needs Debian's chromium (apt-get install -y chromium)"
    ),
]  # a headless chromium
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
    "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--window-size=1400,1000",
]  # fmt: skip


def _chromium(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, f"browser console messages: {console}"
    return done


def _dom(page: Path, hash_part: str = ""):
    doc = parse(_chromium("--dump-dom", page.as_uri() + hash_part).stdout)
    assert not doc.by_id("js-error").text(), doc.by_id("js-error").text()
    return doc


def _visible_cards(doc) -> list[tuple[str, str]]:
    return [
        (group.attrs["data-group"], card.attrs["data-sample"])
        for group in doc.find_all("section", cls="group")
        if "hidden" not in group.attrs
        for card in group.find_all("a", cls="card")
        if "hidden" not in card.attrs
    ]


def test_filters_in_the_browser(site):
    page = site / "iter_000001" / "index.html"
    everything = _dom(page)
    assert len(_visible_cards(everything)) == len(TASKS) * K
    assert everything.by_id("f-count").text() == "4 of 4 groups, 12 of 12 episodes shown"

    by_task = _dom(page, "#task=BETA")  # case-insensitive substring of the task id
    assert _visible_cards(by_task) == [("1:beta_1", "0"), ("1:beta_1", "1"), ("1:beta_1", "2")]
    assert by_task.by_id("f-count").text() == "1 of 4 groups, 3 of 12 episodes shown"

    # reward >= 0.5 and finish "done" (sample 2 of every task ends on the turn budget)
    combined = _dom(page, "#rmin=0.5&finish=done")
    assert _visible_cards(combined) == [
        ("1:alpha_1", "0"), ("1:alpha_1", "1"), ("1:alpha_2", "0"), ("1:alpha_2", "1"), (f"1:{TASKS[3]}", "0"),
    ]  # fmt: skip
    assert combined.by_id("f-count").text() == "3 of 4 groups, 5 of 12 episodes shown"

    dropped = _dom(page, "#kept=1")  # dropped by the |A| filter: alpha_1#1 and all of alpha_2
    assert _visible_cards(dropped) == [
        ("1:alpha_1", "1"),
        ("1:alpha_2", "0"),
        ("1:alpha_2", "1"),
        ("1:alpha_2", "2"),
    ]

    nothing = _dom(page, "#rmin=2")
    assert _visible_cards(nothing) == [] and nothing.by_id("f-count").text().startswith("0 of 4 groups")


def test_token_view_renders_untrusted_text_as_text(site, run_dir):
    doc = _dom(site / "iter_000001" / "group_00000.html", "#tokens")
    views = doc.find_all("div", cls="tokview")
    group = [
        t for t in load_trajectories(run_dir / "rollouts" / "iter_000001.jsonl") if t.task_id == "alpha_1"
    ]
    assert len(views) == len(group) == K
    for view, traj in zip(views, group, strict=True):
        spans = view.find_all("span", cls="tok")
        assert len(spans) == traj.num_tokens  # one span per token id
        assert sum("gen" in s.classes for s in spans) == traj.num_generated_tokens  # loss mask 1
        assert [s.attrs["title"].split(" | ")[0] for s in spans[:2]] == [
            f"#0 id {traj.token_ids[0]}",
            f"#1 id {traj.token_ids[1]}",
        ]
        assert XSS_TEXT in view.text()
    assert not doc.find_all("img"), "model output became markup"
    assert len(doc.find_all("script")) == 1 + K  # the viewer's script and the K JSON data blocks only


def test_screenshot(site, tmp_path):
    shot = tmp_path / "iteration.png"
    _chromium(f"--screenshot={shot}", (site / "iter_000001" / "index.html").as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
