"""The docs read where people read them: every relative link in the README and in docs/ resolves as GitHub resolves
it (relative to the file, in the repository, without the site's build), and no tracked page or results file holds a
path of the machine that wrote it (`/work/...`, `/tmp/...`: meaningless in a reader's clone)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|tmp|home|root)/[\w.-]+")
CODE = re.compile(r"```.*?```", re.S)
ISSUE = re.compile(r"\b[Ii]ssues? \d+")  # ours; upstream trackers are cited as "issue #N" with a link


def tracked(*patterns: str) -> list[Path]:
    done = subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [ROOT / line for line in done.stdout.splitlines()]


def unresolved_links(page: Path) -> list[str]:
    """Links of `page` (outside code blocks) whose target file does not exist relative to it in the repository."""
    text = CODE.sub("", page.read_text())
    missing = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            continue
        path = target.split("#", 1)[0]
        if path and not (page.parent / path).exists():
            missing.append(target)
    return missing


def test_every_relative_link_resolves_in_the_repository_as_github_shows_it():
    pages = [ROOT / "README.md", *tracked("docs/*.md", "docs/**/*.md", "benchmarks/results/*.md")]
    broken = {str(p.relative_to(ROOT)): links for p in pages if (links := unresolved_links(p))}
    assert broken == {}


def test_a_link_that_only_the_site_build_resolves_is_caught(tmp_path: Path):
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "x.json").write_text("{}")
    page.write_text(
        "[site only](results/x.json), [repo](../benchmarks/results/x.json), [web](https://a.b/c)\n"
    )
    assert unresolved_links(page) == ["results/x.json"]


def test_no_tracked_doc_or_results_file_holds_a_machine_path():
    files = [ROOT / "README.md", *tracked("docs/*.md", "docs/**/*.md", "benchmarks/results/**")]
    found = {}
    for path in files:
        if path.suffix not in {".md", ".json", ".txt"}:
            continue
        hits = sorted(set(MACHINE_PATH.findall(path.read_text(errors="replace"))))
        if hits:
            found[str(path.relative_to(ROOT))] = hits[:5]
    assert found == {}


def test_no_page_cites_an_issue_number_a_reader_cannot_open():
    """Our issue tracker is not the reader's: a page says what was asked or when, not "issue 39"."""
    pages = [ROOT / "README.md", *tracked("docs/*.md", "docs/**/*.md")]
    cited = {str(p.relative_to(ROOT)): ISSUE.findall(p.read_text()) for p in pages}
    assert {page: found for page, found in cited.items() if found} == {}


def test_the_machine_path_check_sees_the_paths_it_must():
    text = 'run_dir: "/work/main/runs/x", see /tmp/fresh41/runs, not a/tmp/y nor ~/work/z nor runs/tmp/q'
    assert MACHINE_PATH.findall(text) == ["/work/main", "/tmp/fresh41"]
