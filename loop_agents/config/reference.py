"""Write the configuration reference (`docs/reference/configuration.md`) from the schema, and check it.

    python -m loop_agents.config.reference            # write docs/reference/configuration.md
    python -m loop_agents.config.reference --check    # exit 1 with one line when the page is stale or a key
                                                      # has no one-line meaning

Every key of the typed schema (`loop_agents/config/schema.py`) is listed with its type, its schema default, the
value the default run composes (`conf/config.yaml`: llm=tiny, gpu_allocation=cpu, algorithm=loop, env=bundled)
where that differs, the allowed values (`validate.CHOICES`, `LOWER_BOUNDS`, `UPPER_BOUNDS`) and its one line of
meaning. The meaning is the field's own comment in the schema: the trailing comment on the field's line(s), or
the comment block right above it (the convention of schema.py and of the environments' settings classes). A field
without one is an error here, so a new key cannot land undocumented (`tests/config/test_reference.py`). The
environments' own settings (`env.options.<key>`) are listed per family from the family's settings class, and the
presets under `conf/` with their header comment. The output depends only on the code and `conf/` as they are
in the tree (uncommitted edits included): no clock, no git. Render it and commit it together with the change that
moved it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from loop_agents.config import validate
from loop_agents.config.field_docs import (
    class_doc,
    class_field_docs,
    family_settings,
    field_default,
    nested_class,
    schema_keys,
    undocumented,
)
from loop_agents.config.load import compose
from loop_agents.config.schema import RootConfig

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = Path("docs") / "reference" / "configuration.md"
CONF_DIR = ROOT / "conf"
PRESET_GROUPS = ("llm", "gpu_allocation", "algorithm", "env", "experiment", "accelerate")


def _code(value: Any) -> str:
    if value is dataclasses.MISSING or value == "???":  # omegaconf.MISSING
        return "required (set by a preset)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return '`""`' if value == "" else f"`{value}`"
    if isinstance(value, list):
        return "`[" + ", ".join(str(v) for v in value) + "]`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return f"`{value}`"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and not isinstance(value, bool) else str(value)


def allowed(key: str, type_name: str) -> str:

    choices = getattr(validate, "CHOICES", {})
    if key in choices:
        return " | ".join(f"`{c}`" for c in choices[key])
    parts = []
    low = getattr(validate, "LOWER_BOUNDS", {}).get(key)
    if low is not None:
        parts.append(f"{'≥' if low[1] else '>'} {_num(low[0])}")
    high = getattr(validate, "UPPER_BOUNDS", {}).get(key)
    if high is not None:
        parts.append(f"≤ {_num(high)}")
    if "None" in type_name and parts:
        parts.append("or `null`")
    if parts:
        return ", ".join(parts)
    if type_name == "bool":
        return "`true` | `false`"
    return ""


def _cell(text: str) -> str:
    """A table cell: pipes escaped, one line, `<`/`>` outside code spans shown as text (not HTML)."""
    parts = str(text).replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):  # outside backticks
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _type(name: str) -> str:
    return f"`{name.replace('|', '∣')}`"


def _default_run() -> Any:

    return OmegaConf.to_container(compose([]), resolve=False)


def _lookup(tree: Any, key: str) -> Any:
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return dataclasses.MISSING
        node = node[part]
    return node


def _schema_table(keys: list[tuple[str, type, dataclasses.Field, str]], run: Any) -> list[str]:
    lines = [
        "| key | type | default | default run | allowed | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, _, f, doc in keys:
        default = field_default(f)
        if dataclasses.is_dataclass(default):
            lines.append(f"| `{key}` | settings block | | | | {_cell(doc)} |")
            continue
        composed = _lookup(run, key)
        in_run = "" if composed == default or composed is dataclasses.MISSING else _code(composed)
        cells = [f"`{key}`", _type(str(f.type)), _code(default), in_run, allowed(key, str(f.type)), doc]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _env_options_section() -> list[str]:
    lines = [
        "## `env.options`: each environment's own settings",
        "",
        "`env.options.<key>=value` (no `+` needed) sets one of the selected environment's settings, typed by its",
        "settings class and checked at start-up: a misspelled key, a wrong type or an out-of-range value is one",
        "`config error: env.options.<key>: …` line (see [Troubleshooting](../troubleshooting.md)). Defaults below",
        "are the class's; the presets under `conf/env/` and `conf/experiment/` set some of them.",
        "",
    ]
    for names, cls in family_settings():
        module = cls.__module__.replace(".", "/") + ".py"
        lines += [
            f"### {', '.join(f'`env={n}`' for n in names)}",
            "",
            f"Settings class `{cls.__name__}` (`{module}`).",
            "",
            "| key | type | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        docs = class_field_docs(cls)
        for f in dataclasses.fields(cls):
            cells = [
                f"`env.options.{f.name}`",
                _type(str(f.type)),
                _code(field_default(f)),
                docs.get(f.name, ""),
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    return lines


def _preset_header(path: Path, limit: int = 240) -> str:
    """The preset's header comment in one line (cut at `limit` characters)."""
    text = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        body = line.lstrip("#").strip()
        if not body.startswith("@package"):
            text.append(body)
    joined = " ".join(t for t in text if t)
    if len(joined) > limit:
        joined = joined[:limit].rsplit(" ", 1)[0] + " …"
    return joined


def _presets_section(conf_dir: Path) -> list[str]:
    lines = [
        "## Presets (`conf/`)",
        "",
        "A preset is one YAML file of a group; pick it with `<group>=<name>` (e.g. `algorithm=grpo`,",
        "`experiment=appworld_demo`). An `experiment` sets several groups and keys at once. The text shown is the",
        "file's header comment.",
        "",
        "| group | preset | what it is |",
        "| --- | --- | --- |",
    ]
    for group in PRESET_GROUPS:
        for path in sorted((conf_dir / group).glob("*.yaml")):
            lines.append(f"| `{group}` | `{path.stem}` | {_cell(_preset_header(path))} |")
    return lines + [""]


def render(conf_dir: Path = CONF_DIR) -> str:

    run = _default_run()
    lines = [
        "---",
        "hide: [navigation]  # the tables need the width",
        "---",
        "<!-- written by `python -m loop_agents.config.reference` from loop_agents/config/schema.py, "
        "loop_agents/config/validate.py and conf/; do not edit: `--check` fails when this page is stale -->",
        "# Configuration reference",
        "",
        "Every key of `python -m loop_agents.train`, from the typed schema (`loop_agents/config/schema.py`). Any key",
        "is a Hydra override (`algorithm.rollouts_per_task=8`); `python -m loop_agents.train … --cfg job` prints the",
        "composed configuration. A misspelled key, a wrong type, a value outside *allowed* or an unknown preset",
        "stops start-up with one `config error: …` line and exit code 2.",
        "",
        "- **default**: the schema's default; *required* keys are set by a preset.",
        "- **default run**: the value `conf/config.yaml` composes (llm=tiny, gpu_allocation=cpu, algorithm=loop,",
        "  env=bundled), shown only where it differs from the schema default.",
        "- **allowed**: the values or range `loop_agents/config/validate.py` accepts (further cross-key checks are",
        "  in [Troubleshooting](../troubleshooting.md)).",
        "",
        "Common changes: the algorithm is `algorithm=<preset>` (see [Algorithms](../algorithms.md)); the rollouts",
        "per task are `algorithm.rollouts_per_task` (K); the AppWorld data root is `env.options.root` with",
        "`env=appworld`.",
        "",
    ]
    for f in dataclasses.fields(RootConfig):
        section = nested_class(RootConfig, f.name)
        if section is None:
            continue
        keys = [k for k in schema_keys(RootConfig) if k[0].split(".")[0] == f.name]
        doc = class_doc(section)
        lines += [f"## `{f.name}`", "", doc, "", *_schema_table(keys, run), ""]
    lines += _env_options_section()
    lines += _presets_section(conf_dir)
    return "\n".join(lines).rstrip("\n") + "\n"


def check(root: Path = ROOT) -> list[str]:
    problems = [
        f"schema key {key} has no one-line meaning (a comment on or above its field)"
        for key in undocumented()
    ]
    path = root / OUTPUT
    expected = render()
    actual = path.read_text() if path.exists() else ""
    if actual != expected:
        old, new = actual.splitlines(), expected.splitlines()
        lineno = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False), 1) if a != b),
            min(len(old), len(new)) + 1,
        )
        problems.append(
            f"{OUTPUT}:{lineno}: differs from what the schema and conf/ give (the page renders the tree as it is: "
            "commit it with the schema, settings-class or conf/ change that moved it)"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loop_agents.config.reference", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is stale")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for line in problems:
            print(f"[config reference] {line}; run `python -m loop_agents.config.reference`", file=sys.stderr)
        return 1 if problems else 0
    missing = undocumented()
    if missing:
        for key in missing:
            print(f"[config reference] schema key {key} has no one-line meaning", file=sys.stderr)
        return 1
    path = ROOT / OUTPUT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render())
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
