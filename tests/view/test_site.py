"""The rendered site, parsed with html.parser: structure, numbers, escaping, incremental rebuilds, CLI, serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from loop_agents.rollout.trajectory import load_trajectories, save_trajectories
from loop_agents.view import build_site
from loop_agents.view.run_dir import find_run_files
from loop_agents.view.serve import start_server
from tests.view.dom import parse
from tests.view.run_factory import TASKS, XSS_TASK, XSS_TEXT, K


def _page(site: Path, rel: str):
    return parse((site / rel).read_text())


def test_index_lists_iterations_and_evaluations(site):
    doc = _page(site, "index.html")
    hrefs = {a.attrs["href"] for a in doc.find_all("a")}
    assert {"iter_000001/index.html", "iter_000002/index.html", "eval_dev_iter_000002/index.html"} <= hrefs
    tables = doc.find_all("table")
    rollout_rows = [[td.text() for td in tr.find_all("td")] for tr in tables[0].find_all("tr")[1:]]
    # iteration 1: rewards sum 1.5 + 3 + 0.5 + 0.5 = 5.5 over 12; |A| < 0.01 for alpha_1#1 and all of alpha_2
    assert rollout_rows[0][:6] == ["1", "12", "4", "0.458", "0.333", "0.333"]
    eval_rows = [[td.text() for td in tr.find_all("td")] for tr in tables[1].find_all("tr")[1:]]
    # alpha_1, alpha_2 pass, beta_1 fails: TGC 2/3, SGC 1/2; difficulty 1 all pass, difficulty 2 none
    assert eval_rows[0][:8] == ["dev", "2", "3", "1.000", "0.667", "0.500", "1.000 / 1.000", "0.000 / 0.000"]
    assert len(doc.find_all("svg", cls="chart")) >= 3


def test_iteration_page_has_groups_cards_and_filters(site, run_dir):
    doc = _page(site, "iter_000001/index.html")
    groups = doc.find_all("section", cls="group")
    assert [g.attrs["data-group"] for g in groups] == [f"1:{t}" for t in TASKS]
    trajectories = load_trajectories(run_dir / "rollouts" / "iter_000001.jsonl")
    cards = doc.find_all("a", cls="card")
    assert len(cards) == len(TASKS) * K == len(trajectories)
    for card, traj in zip(cards, trajectories, strict=True):
        assert float(card.attrs["data-reward"]) == traj.reward
        assert card.attrs["data-filtered"] == str(int(traj.metadata["filtered"]))
        assert card.attrs["data-finish"] == traj.finish_reason.value
        assert (site / "iter_000001" / card.attrs["href"]).is_file()
    for element_id in ("filters", "f-task", "f-rmin", "f-rmax", "f-finish", "f-kept", "f-success", "f-count"):
        doc.by_id(element_id)
    finish_options = {o.attrs["value"] for o in doc.by_id("f-finish").find_all("option")}
    assert {"", "done", "turn_budget", "context_budget"} <= finish_options
    assert "no learning signal" in groups[1].text()  # alpha_2: all three rewards equal


def test_group_page_side_by_side_turns_tests_and_tokens(site, run_dir, tiny_tokenizer):
    doc = _page(site, "iter_000001/group_00000.html")
    grid = doc.find_all("div", cls="grid")[0]
    assert "repeat(3," in grid.attrs["style"]
    assert len(grid.find_all("div", cls="header")) == K
    turns = grid.find_all("div", cls="turn")
    assert [t.attrs["data-turn"] for t in turns] == [
        "0",
        "0",
        "0",
        "1",
        "1",
        "1",
    ]  # turn i of each rollout on row i
    passed = [li.attrs["data-passed"] for li in grid.find_all("li", cls="test")]
    assert passed == ["1", "1", "1", "0", "0", "0"]  # rewards 1.0, 0.5, 0.0 of alpha_1
    trajectories = [
        t for t in load_trajectories(run_dir / "rollouts" / "iter_000001.jsonl") if t.task_id == "alpha_1"
    ]
    for column, traj in enumerate(trajectories):
        data = json.loads(doc.by_id(f"tokens-{column}").text())
        assert data["id"] == traj.token_ids and data["mask"] == traj.loss_mask
        assert data["lp"] == [round(v, 4) for v in traj.sample_logprobs]
        assert data["text"][0] == tiny_tokenizer.decode([traj.token_ids[0]])
        assert "".join(data["text"]) == tiny_tokenizer.decode(
            traj.token_ids
        )  # ASCII text: pieces join exactly


def test_untrusted_text_is_escaped_everywhere(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    for path in pages:
        raw = path.read_text()
        doc = parse(raw)
        assert not doc.find_all("img"), path
        for node in doc.iter():
            assert not [a for a in node.attrs if a.startswith("on")], (path, node.tag, node.attrs)
        scripts = doc.find_all("script")
        assert sum("type" not in s.attrs for s in scripts) == 1, path  # only the viewer's own inline script
        assert all(
            s.attrs.get("type") in (None, "application/json") and "src" not in s.attrs for s in scripts
        )
        for data_script in doc.find_all("script", type="application/json"):
            assert "</" not in data_script.text()
    group = _page(site, "iter_000001/group_00000.html")
    assert XSS_TEXT in group.text()  # shown verbatim as text
    xss_group = [g for g in _page(site, "iter_000001/index.html").find_all("section") if XSS_TASK in g.text()]
    assert xss_group and xss_group[0].attrs["data-group"] == f"1:{XSS_TASK}"
    assert "<script>cfg</script>" in _page(site, "index.html").text()  # config.yaml too


def test_rebuild_renders_only_changed_files(run_dir, tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    for rel in ("rollouts/iter_000001.jsonl", "rollouts/iter_000002.jsonl", "eval/dev_iter_000002.jsonl"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes((run_dir / rel).read_bytes())
    out = tmp_path / "site"
    build_site(run, out)
    stamp = {p: p.stat().st_mtime_ns for p in out.rglob("group_*.html")}
    build_site(run, out)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("group_*.html")} == stamp
    trajectories = load_trajectories(run / "rollouts" / "iter_000002.jsonl")
    save_trajectories(run / "rollouts" / "iter_000002.jsonl", trajectories[:K])  # one group left
    os.utime(run / "rollouts" / "iter_000002.jsonl", ns=(1, 1))
    build_site(run, out)
    assert sorted(p.name for p in (out / "iter_000002").glob("group_*.html")) == ["group_00000.html"]
    assert all(p.stat().st_mtime_ns == stamp[p] for p in (out / "iter_000001").glob("group_*.html"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["files"]["iter_000002"]["summary"]["episodes"] == K
    assert not parse((out / "iter_000002" / "group_00000.html").read_text()).find_all("details", cls="tokens")


def test_run_dir_layouts_and_errors(tmp_path, run_dir):
    nested = tmp_path / "nested"
    (nested / "eval" / "test_normal").mkdir(parents=True)
    (nested / "eval" / "test_normal" / "iter_000010.jsonl").write_bytes(
        (run_dir / "eval" / "dev_iter_000002.jsonl").read_bytes()
    )
    files = find_run_files(nested)
    assert [(f.split, f.iteration, f.page_name) for f in files.evals] == [
        ("test_normal", 10, "eval_test_normal_iter_000010")
    ]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        find_run_files(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no rollouts"):
        find_run_files(tmp_path / "empty")


def test_cli(run_dir, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run(
        [sys.executable, "-m", "loop_agents.view", str(run_dir), "--out", str(tmp_path / "s")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and (tmp_path / "s" / "index.html").is_file()
    bad = subprocess.run(
        [sys.executable, "-m", "loop_agents.view", str(tmp_path / "nope")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_serve_binds_loopback_only(site):
    server = start_server(site, 0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/iter_000001/index.html", timeout=10
        ) as response:
            assert response.status == 200
            assert b'id="filters"' in response.read()
    finally:
        server.shutdown()
        server.server_close()
