"""Render the results pages from the canonical result files, and check that the pages still agree with them.

    python -m benchmarks.render            # write results/README_performance.md and README.md's results block
    python -m benchmarks.render --check    # exit 1 with one line when a rendered number differs from its file

The canonical file of a benchmark is `benchmarks/results/<name>.json`, the latest run that `python -m benchmarks run`
recorded (`benchmarks/runner.py`); every run is also kept under `benchmarks/results/history/<name>/`. Only records
whose `benchmark` names their file are rendered (the other JSON files there, such as `demo_seeds.json`, have their
own reports). `README_performance.md` is the summary table, the ratio definitions, then `NOTES.md` verbatim.
`README.md` holds a short table of the benchmarks with a goal between `<!-- results:begin -->` and
`<!-- results:end -->`, and the learning claims' table (`benchmarks/learning.py`, from each claim's raw file)
between `<!-- learning:begin -->` and `<!-- learning:end -->`; without the markers the README is left alone.
`docs/ablation.md` holds the ablation's tables (`benchmarks/ablation_table.py`) between `<!-- ablation:begin -->`
and `<!-- ablation:end -->`; the README's learning table has a pointer row per preset. `docs/performance.md` holds
the asynchronous-LOOP table (`benchmarks/async_table.py`) between `<!-- async:begin -->` and `<!-- async:end -->`.
The output depends only on the files: no clock, no git, rows in the registry's order.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from benchmarks import ablation_table, async_table, learning

ROOT = Path(__file__).resolve().parent.parent
RESULTS_SUBDIR = Path("benchmarks") / "results"
REPORT_NAME = "README_performance.md"
ABLATION_PAGE = Path("docs") / "ablation.md"
PERFORMANCE_PAGE = Path("docs") / "performance.md"
NOTES_NAME = "NOTES.md"  # hand-written notes appended to the report
README_BEGIN = "<!-- results:begin -->"
README_END = "<!-- results:end -->"
REPORT_HEADER = (
    "<!-- written by `python -m benchmarks.render` from benchmarks/results/*.json (+ NOTES.md); "
    "do not edit: `python -m benchmarks.render --check` fails on a hand-edited number -->\n"
)


def _registry(registry=None) -> list:
    if registry is not None:
        return registry
    from benchmarks.runner import BENCHMARKS

    return BENCHMARKS


def fmt_ratio(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0 or abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def fmt_result(record: dict) -> str:
    if record.get("status") != "ok":
        return record.get("status", "?")
    passed = record.get("passed")
    return "report" if passed is None else ("pass" if passed else "**FAIL**")


def fmt_machine(record: dict, load: bool = True) -> str:
    machine = record.get("machine", {})
    text = f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores"
    if load and machine.get("load_avg_1m") is not None:
        text += f" (load {machine['load_avg_1m']})"
    return text


def fmt_measured(record: dict) -> str:
    """The ratio, and beside it any other `ratio_*` number the benchmark returned (trl_compare's multi-turn)."""
    text = fmt_ratio(record.get("ratio"))
    details = record.get("details") or {}
    extra = [
        f"{key[len('ratio_') :].replace('_', '-')} {fmt_ratio(value)}"
        for key, value in sorted(details.items())
        if key.startswith("ratio_") and isinstance(value, int | float) and not isinstance(value, bool)
    ]
    return text + (f" ({', '.join(extra)})" if extra else "")


def load_results(results_dir: Path, registry=None) -> list[dict]:
    """The canonical records `results_dir/<name>.json` (written by `run_one`), in the registry's order."""
    order = {b.name: i for i, b in enumerate(_registry(registry))}
    records = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and data.get("benchmark") == path.stem and "status" in data:
            records.append(data)
    return sorted(records, key=lambda r: (order.get(r["benchmark"], len(order)), r["benchmark"]))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_report(records: list[dict]) -> str:
    """The performance page's summary table; the raw link is relative to `benchmarks/results/`."""
    lines = [
        "| Benchmark | Question | Side by side (same run) | Measured ratio | Goal | Result | Date | Machine | Commit | Raw |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        commit = r.get("commit", "?") + ("+dirty" if r.get("dirty") else "")
        summary = r.get("summary") or (r.get("output_tail", "").splitlines() or [""])[-1][:120]
        if r.get("quick"):
            summary += " (quick sizes)"
        cells = [
            f"`{r['benchmark']}`",
            r.get("question", ""),
            summary,
            fmt_measured(r),
            r.get("goal") or "report",
            fmt_result(r),
            r.get("date", "?"),
            fmt_machine(r),
            f"`{commit}`",
            f"[{r['benchmark']}.json]({r['benchmark']}.json)",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def render_definitions(records: list[dict]) -> str:
    lines = ["How each ratio is measured (both sides in the same run):", ""]
    for r in records:
        if r.get("ratio_definition"):
            lines.append(f"- `{r['benchmark']}`: {r['ratio_definition']}.")
        if r.get("source"):
            lines.append(f"  Canonical record made from `{r['source']}`.")
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def render_performance_page(results_dir: Path, registry=None) -> str:
    records = load_results(results_dir, registry)
    text = REPORT_HEADER + render_report(records)
    definitions = render_definitions(records)
    if definitions:
        text += "\n" + definitions
    notes = results_dir / NOTES_NAME
    if notes.exists():
        text += "\n" + notes.read_text()
    return text


def render_readme_block(results_dir: Path, registry=None) -> str:
    """The README's small table: one row per benchmark with a goal; links relative to the repository root."""
    lines = [
        f"{README_BEGIN}",
        "<!-- written by `python -m benchmarks.render` from benchmarks/results/<name>.json; do not edit -->",
        "| Benchmark | Measured ratio | Goal | Result | Machine | Date | Raw |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in load_results(results_dir, registry):
        if not r.get("goal"):
            continue
        quick = " (quick sizes)" if r.get("quick") else ""
        cells = [
            f"`{r['benchmark']}`",
            fmt_measured(r) + quick,
            r["goal"],
            fmt_result(r),
            fmt_machine(r, load=False),
            r.get("date", "?"),
            f"[{r['benchmark']}.json]({RESULTS_SUBDIR.as_posix()}/{r['benchmark']}.json)",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append(README_END)
    return "\n".join(lines)


def _block_span(text: str, begin_marker: str, end_marker: str) -> tuple[int, int] | None:
    begin, end = text.find(begin_marker), text.find(end_marker)
    if begin < 0 or end < begin:
        return None
    return begin, end + len(end_marker)


def rendered_files(root: Path, registry=None) -> dict[Path, str]:
    """What each generated file should hold: {path: full text}."""
    results_dir = root / RESULTS_SUBDIR
    out = {results_dir / REPORT_NAME: render_performance_page(results_dir, registry)}
    readme = root / "README.md"
    if readme.exists():
        text, replaced = readme.read_text(), False
        blocks = (
            (README_BEGIN, README_END, lambda: render_readme_block(results_dir, registry)),
            (learning.BEGIN, learning.END, lambda: learning.render_block(root)),
        )
        for begin, end, block in blocks:
            span = _block_span(text, begin, end)
            if span is not None:
                text, replaced = text[: span[0]] + block() + text[span[1] :], True
        if replaced:
            out[readme] = text
    pages = (
        # the ablation's full tables (the README holds a pointer row per preset)
        (ABLATION_PAGE, ablation_table.BEGIN, ablation_table.END, ablation_table.render_docs_block),
        (PERFORMANCE_PAGE, async_table.BEGIN, async_table.END, async_table.render_block),
    )
    for name, begin, end, block in pages:
        page = root / name
        span = _block_span(page.read_text(), begin, end) if page.exists() else None
        if span is not None:
            text = page.read_text()
            out[page] = text[: span[0]] + block(results_dir) + text[span[1] :]
    return out


def write(root: Path = ROOT, registry=None) -> list[Path]:
    written = []
    for path, text in rendered_files(root, registry).items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _split_row(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def _difference(path: Path, actual: str, expected: str, root: Path) -> str:
    """One line naming the file, the row and the number that differs from its canonical file."""
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    actual_lines, expected_lines = actual.splitlines(), expected.splitlines()
    expected_rows = {}
    header: list[str] = []
    for line in expected_lines:
        if line.startswith("| Benchmark"):
            header = _split_row(line)
        elif line.startswith("| `"):
            expected_rows[_split_row(line)[0]] = (header, _split_row(line))
    for lineno, line in enumerate(actual_lines, 1):
        if lineno <= len(expected_lines) and line == expected_lines[lineno - 1]:
            continue
        cells = _split_row(line) if line.startswith("| `") else []
        if cells and cells[0] in expected_rows:
            names, want = expected_rows[cells[0]]
            name = cells[0].strip("`")
            source = RESULTS_SUBDIR / f"{name}.json"
            for column, have, should in zip(names, cells, want, strict=False):
                if have == should:
                    continue
                have_n, should_n = _NUMBER.findall(have), _NUMBER.findall(should)
                pairs = [(a, b) for a, b in zip(have_n, should_n, strict=False) if a != b]
                if pairs:
                    a, b = pairs[0]
                    return f"{rel}:{lineno}: {name} {column} shows {a} but {source} gives {b}"
                return f"{rel}:{lineno}: {name} {column} shows {have!r} but {source} gives {should!r}"
        return f"{rel}:{lineno}: differs from what `python -m benchmarks.render` writes from {RESULTS_SUBDIR}/*.json"
    return f"{rel}:{len(actual_lines) + 1}: shorter than what `python -m benchmarks.render` writes"


def check(root: Path = ROOT, registry=None) -> list[str]:
    """One line per generated file that differs from its render; empty when all agree."""
    problems = []
    for path, expected in rendered_files(root, registry).items():
        actual = path.read_text() if path.exists() else ""
        if actual != expected:
            problems.append(_difference(path, actual, expected, root))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.render", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page differs from its files"
    )
    parser.add_argument("--root", default=str(ROOT), help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if args.check:
        problems = check(root)
        for line in problems:
            print(f"[results] {line}; run `python -m benchmarks.render`", file=sys.stderr)
        return 1 if problems else 0
    for path in write(root):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
