"""MkDocs hook: serve the benchmark result files under `results/` in the site.

The canonical results live in `benchmarks/results/` (`python -m benchmarks.render` writes
`README_performance.md` there from the `<name>.json` files), outside `docs/`. This hook adds them to the build
as `results/<path>`, so the docs link the real files (`results/trl_compare.json`,
`results/README_performance.md`) and a strict build fails when one goes missing. Nothing is copied into docs/.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
# Markdown files shown as pages (in the nav); NOTES.md is already inside README_performance.md.
PAGES = ("README_performance.md", "gpu_learner_check.md", "learner_throughput_profile.md")
DATA_SUFFIXES = (".json", ".txt", ".png")


def on_files(files, config):
    for path in sorted(RESULTS.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(RESULTS).as_posix()
        if path.suffix == ".md" and rel not in PAGES:
            continue
        if path.suffix != ".md" and path.suffix not in DATA_SUFFIXES:
            continue
        files.append(File.generated(config, f"results/{rel}", abs_src_path=str(path)))
    return files
