"""The docs site builds in strict mode (a broken link, a missing anchor or a page left out of the nav fails), and
the README stays a front door: at most 250 lines, every local link it has points at a file that exists."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).parent / "mkdocs"


def test_readme_is_at_most_250_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move the detail into docs/"


def test_readme_links_point_at_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local, "the README links into the docs"
    missing = [t for t in local if t and not (ROOT / t).exists()]
    assert missing == []


@pytest.mark.skipif(not MKDOCS.exists() and shutil.which("mkdocs") is None, reason="mkdocs is not installed")
def test_docs_build_in_strict_mode(tmp_path):
    mkdocs = str(MKDOCS) if MKDOCS.exists() else shutil.which("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").is_file()
    assert (tmp_path / "site" / "results" / "README_performance" / "index.html").is_file()


@pytest.mark.skipif(not MKDOCS.exists() and shutil.which("mkdocs") is None, reason="mkdocs is not installed")
def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The bad input of issue 41: a page linking a page that does not exist stops the build."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "benchmarks").mkdir()
    shutil.copytree(ROOT / "benchmarks" / "results", copy / "benchmarks" / "results")
    page = copy / "docs" / "concepts.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    mkdocs = str(MKDOCS) if MKDOCS.exists() else shutil.which("mkdocs")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
