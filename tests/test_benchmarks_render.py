"""`python -m benchmarks.render`: the results pages agree with their canonical files on this checkout, `--check`
fails with one line on a hand-edited number, and the render depends only on the files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import learning, render

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture()
def copy_root(tmp_path) -> Path:
    """The README, the ablation and performance pages and the canonical result files (not the history) in a fresh
    root."""
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for path in RESULTS.iterdir():
        if path.is_file():
            shutil.copy(path, results / path.name)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / render.ABLATION_PAGE, tmp_path / render.ABLATION_PAGE)  # the ablation's tables
    shutil.copy(ROOT / render.PERFORMANCE_PAGE, tmp_path / render.PERFORMANCE_PAGE)  # the asynchronous table
    return tmp_path


def _check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.render", "--check", "--root", str(root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} in {path.name}: {text.count(old)} times"
    path.write_text(text.replace(old, new))


def test_the_checked_in_pages_agree_with_their_files():
    assert render.check(ROOT) == []
    readme = (ROOT / "README.md").read_text()
    assert readme.count(render.README_BEGIN) == 1 and readme.count(render.README_END) == 1


def test_check_passes_on_a_copy_and_fails_on_a_hand_edited_number(copy_root):
    assert _check(copy_root).returncode == 0

    page = copy_root / "benchmarks" / "results" / "README_performance.md"
    _replace_once(page, "| 2.12 (multi-turn 2.30) | >= 2 |", "| 2.50 (multi-turn 2.30) | >= 2 |")
    proc = _check(copy_root)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "benchmarks/results/README_performance.md:" in lines[0]
    assert "trl_compare" in lines[0] and "shows 2.50" in lines[0]
    assert "benchmarks/results/trl_compare.json gives 2.12" in lines[0]


def test_check_fails_on_a_hand_edited_readme_number(copy_root):
    _replace_once(copy_root / "README.md", "| `kv_block_size` | 1.60 |", "| `kv_block_size` | 1.70 |")
    proc = _check(copy_root)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("[results] README.md:")
    assert "kv_block_size" in proc.stderr and "shows 1.70" in proc.stderr and "gives 1.60" in proc.stderr


def test_check_fails_when_a_file_changes_and_the_page_is_not_rendered(copy_root):
    path = copy_root / "benchmarks" / "results" / "startup.json"
    record = json.loads(path.read_text())
    record["ratio"] = 0.45
    path.write_text(json.dumps(record, indent=2) + "\n")
    proc = _check(copy_root)
    assert proc.returncode == 1 and "shows 0.97" in proc.stderr and "startup.json gives 0.45" in proc.stderr
    render.write(copy_root)  # rendering again brings the pages back in line
    assert render.check(copy_root) == []
    assert "| `startup` | 0.45 (quick sizes) | <= 0.5 |" in (copy_root / "README.md").read_text()


def test_the_render_is_deterministic(copy_root):
    first = render.rendered_files(copy_root)
    render.write(copy_root)
    again = render.rendered_files(copy_root)
    assert {p.name: t for p, t in first.items()} == {p.name: t for p, t in again.items()}
    on_repo = render.rendered_files(ROOT)
    assert sorted(t for t in first.values()) == sorted(t for t in on_repo.values())


def test_a_readme_without_markers_is_left_alone(copy_root):
    readme = copy_root / "README.md"
    text = readme.read_text()
    start, end = text.index(render.README_BEGIN), text.index(render.README_END) + len(render.README_END)
    text = text[:start] + text[end:]
    start, end = text.index(learning.BEGIN), text.index(learning.END) + len(learning.END)
    readme.write_text(text[:start] + text[end:])
    assert readme not in render.rendered_files(copy_root)
    assert render.check(copy_root) == []


def test_check_fails_on_a_hand_edited_learning_claim(copy_root):
    """The learning table is rendered from each claim's raw file too (benchmarks/learning.py)."""
    readme = copy_root / "README.md"
    assert readme.read_text().count(learning.BEGIN) == 1
    _replace_once(readme, "IQM +0.121 [+0.042, +0.204]", "IQM +0.151 [+0.042, +0.204]")
    proc = _check(copy_root)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("[results] README.md:") and "0.151" in proc.stderr


def test_a_new_seed_in_a_raw_file_moves_its_claim(copy_root):
    path = copy_root / "benchmarks" / "results" / "appworld_demo_rl_gain.json"
    record = json.loads(path.read_text())
    record["aggregate"]["intervals_excluding_zero"] = 3
    path.write_text(json.dumps(record, indent=1) + "\n")
    assert _check(copy_root).returncode == 1
    render.write(copy_root)
    row = next(
        line for line in (copy_root / "README.md").read_text().splitlines() if "15 iterations:" in line
    )
    assert "interval above 0 on 3 of 3 seeds" in row
