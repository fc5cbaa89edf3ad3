"""The one-line meaning of every configuration key, read from the comments beside the fields: the schema's
(`loop_agents/config/schema.py`) and each built-in family's `env.options` settings class.

A field's meaning is its trailing comment (on any of its lines) or the comment block right above it; a key
without one is what `undocumented()` lists (the configuration reference refuses to render past it).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import sys
import tokenize
from typing import Any

from loop_agents.config.schema import RootConfig
from loop_agents.envs.registry import BUILT_IN
from loop_agents.envs.registry import family as registry_family

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


def nested_class(cls: type, name: str) -> type | None:
    for f in dataclasses.fields(cls):
        if f.name == name and f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            value = f.default_factory()  # type: ignore[misc]
            if dataclasses.is_dataclass(value):
                return type(value)
    return None


def field_default(f: dataclasses.Field) -> Any:
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
            nested = nested_class(cls, f.name)
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

    full_schema = root is None
    root = root or RootConfig
    missing = [key for key, _, _, doc in schema_keys(root) if not doc]
    if full_schema:
        for names, cls in family_settings():
            missing += [
                f"env.options.{key} ({names[0]})" for key, doc in class_field_docs(cls).items() if not doc
            ]
    for f in dataclasses.fields(root):
        nested = nested_class(root, f.name)
        if nested is not None and not class_doc(nested):
            missing.append(f"{f.name} (section: {nested.__name__} has no docstring)")
    return missing


def class_doc(cls: type) -> str:
    """The class's own docstring in one line ("" for a dataclass without one: its __doc__ is its signature)."""
    doc = cls.__dict__.get("__doc__") or ""
    if doc.startswith(cls.__name__ + "("):
        return ""
    return " ".join(doc.split())


def family_settings() -> list[tuple[list[str], type]]:
    """[(family names, settings class)] for the built-in families whose settings class can be found."""
    found: dict[type, list[str]] = {}
    for name in BUILT_IN:  # this package's families (not whatever plugins this machine has installed)
        cls = registry_family(name).settings_class
        if dataclasses.is_dataclass(cls):
            found.setdefault(cls, []).append(name)
    return [(names, cls) for cls, names in found.items()]
