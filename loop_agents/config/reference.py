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
import ast
import dataclasses
import inspect
import io
import re
import sys
import tokenize
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from loop_agents.config import validate
from loop_agents.config.load import compose
from loop_agents.config.schema import RootConfig
from loop_agents.envs.registry import BUILT_IN
from loop_agents.envs.registry import family as registry_family

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = Path("docs") / "reference" / "configuration.md"
CONF_DIR = ROOT / "conf"
PRESET_GROUPS = ("llm", "gpu_allocation", "algorithm", "env", "experiment", "accelerate")
# Families whose env.options are documented (built in); families sharing a settings class are listed together.
_TYPE_IGNORE = re.compile(r"^type:\s*ignore(\[[^\]]*\])?\s*#?\s*")


class UndocumentedKey(Exception):
    """A schema field has no one-line meaning (no trailing comment and no comment block above it)."""


def _comments(source: str) -> dict[int, str]:
    """line number -> the text of the comment on that line (without `#`)."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string.lstrip("#").strip()
    return out


def _is_comment_only(line: str) -> bool:
    return line.strip().startswith("#")


@dataclasses.dataclass(frozen=True)
class FieldDoc:
    name: str
    type: str
    doc: str  # "" when the field has none


def class_field_docs(cls: type) -> dict[str, str]:
    """The one-line meaning of each field of dataclass `cls`, read from its source's comments ("" if none)."""
    source = inspect.getsource(sys.modules[cls.__module__])
    lines = source.splitlines()
    comments = _comments(source)
    tree = ast.parse(source)
    node = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__),
        None,
    )
    if node is None:
        raise UndocumentedKey(f"class {cls.__name__} not found in {cls.__module__}")
    docs: dict[str, str] = {}
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        inline = [
            comments[n] for n in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1) if n in comments
        ]
        inline = [_TYPE_IGNORE.sub("", c).strip() for c in inline]
        inline = [c for c in inline if c and not c.startswith("fmt:")]
        if inline:
            docs[stmt.target.id] = " ".join(inline)
            continue
        above = []
        n = stmt.lineno - 1
        while n >= 1 and _is_comment_only(lines[n - 1]):
            above.insert(0, comments.get(n, ""))
            n -= 1
        docs[stmt.target.id] = " ".join(c for c in above if c)
    return docs


def _fields(cls: type) -> list[FieldDoc]:
    docs = class_field_docs(cls)
    return [FieldDoc(f.name, str(f.type), docs.get(f.name, "")) for f in dataclasses.fields(cls)]


def _nested_class(cls: type, name: str) -> type | None:
    for f in dataclasses.fields(cls):
        if f.name == name and f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            value = f.default_factory()  # type: ignore[misc]
            if dataclasses.is_dataclass(value):
                return type(value)
    return None


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def schema_keys(root: type | None = None) -> list[tuple[str, type, dataclasses.Field, str]]:
    """(dotted key, owning class, field, meaning) for every key of the schema, depth first in schema order.

    A nested settings block (llm.lora, env.turn_schedule) is listed as its own key and then its fields."""
    if root is None:
        root = RootConfig
    out: list[tuple[str, type, dataclasses.Field, str]] = []

    def walk(cls: type, prefix: str) -> None:
        docs = class_field_docs(cls)
        for f in dataclasses.fields(cls):
            key = f"{prefix}{f.name}"
            nested = _nested_class(cls, f.name)
            if (
                prefix
            ):  # the root's sections (run, llm, ...) are headings, documented by their class docstring
                out.append((key, cls, f, docs.get(f.name, "")))
            if nested is not None:
                walk(nested, key + ".")

    walk(root, "")
    return out


def undocumented(root: type | None = None) -> list[str]:
    """Keys without a one-line meaning (the schema's and, for the full schema, every built-in family's
    `env.options`), and root sections without a class docstring."""

    missing = [key for key, _, _, doc in schema_keys(root or RootConfig) if not doc]
    if root is None:
        for names, cls in _family_settings():
            missing += [
                f"env.options.{key} ({names[0]})" for key, doc in class_field_docs(cls).items() if not doc
            ]
    root = root or RootConfig
    for f in dataclasses.fields(root):
        nested = _nested_class(root, f.name)
        if nested is not None and not _class_doc(nested):
            missing.append(f"{f.name} (section: {nested.__name__} has no docstring)")
    return missing


def _class_doc(cls: type) -> str:
    """The class's own docstring in one line ("" for a dataclass without one: its __doc__ is its signature)."""
    doc = cls.__dict__.get("__doc__") or ""
    if doc.startswith(cls.__name__ + "("):
        return ""
    return " ".join(doc.split())


# ----------------------------------------------------------------------------------------------- formatting


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
        default = _default(f)
        if dataclasses.is_dataclass(default):
            lines.append(f"| `{key}` | settings block | | | | {_cell(doc)} |")
            continue
        composed = _lookup(run, key)
        in_run = "" if composed == default or composed is dataclasses.MISSING else _code(composed)
        cells = [f"`{key}`", _type(str(f.type)), _code(default), in_run, allowed(key, str(f.type)), doc]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _family_settings() -> list[tuple[list[str], type]]:
    """[(family names, settings class)] for the built-in families whose settings class can be found."""
    found: dict[type, list[str]] = {}
    for name in BUILT_IN:  # this package's families (not whatever plugins this machine has installed)
        cls = registry_family(name).settings_class
        if dataclasses.is_dataclass(cls):
            found.setdefault(cls, []).append(name)
    return [(names, cls) for cls, names in found.items()]


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
    for names, cls in _family_settings():
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
            cells = [f"`env.options.{f.name}`", _type(str(f.type)), _code(_default(f)), docs.get(f.name, "")]
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
        section = _nested_class(RootConfig, f.name)
        if section is None:
            continue
        keys = [k for k in schema_keys(RootConfig) if k[0].split(".")[0] == f.name]
        doc = _class_doc(section)
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
