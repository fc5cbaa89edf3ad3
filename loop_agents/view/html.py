"""Small HTML building blocks. Every piece of text from a run goes through `esc` (model output is untrusted)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from loop_agents.view.assets import CSS, JS


def esc(value: Any) -> str:
    """Text (or any value's str) escaped for element content and quoted attribute values."""
    return html.escape(str(value), quote=True)


def json_script(element_id: str, data: Any) -> str:
    """Inline JSON data that cannot close its <script> element (`<`, `>`, `&` written as \\u escapes)."""
    text = json.dumps(data, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def page(title: str, body: str, crumbs: Sequence[tuple[str, str | None]] = ()) -> str:
    """A complete self-contained page; `crumbs` are (label, href or None) links above the title."""
    nav = ""
    if crumbs:
        links = [f'<a href="{esc(href)}">{esc(label)}</a>' if href else esc(label) for label, href in crumbs]
        nav = f'<nav class="crumbs">{" / ".join(links)}</nav>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body>"
        f'<div id="js-error"></div>{nav}<h1>{esc(title)}</h1>{body}'
        f"<script>{JS}</script></body></html>\n"
    )


def fmt(value: Any, digits: int = 3) -> str:
    """Numbers rounded for display; None/NaN as an en dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], left_columns: int = 1) -> str:
    """A table of pre-rendered (already escaped) cells; the first `left_columns` columns are left-aligned."""
    head = "".join(
        f'<th class="{"l" if i < left_columns else ""}">{esc(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"l" if i < left_columns else ""}">{c}</td>' for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def badge(text: str, kind: str = "") -> str:
    return f'<span class="badge {esc(kind)}">{esc(text)}</span>'


def key_values(data: dict[str, Any]) -> str:
    """A two-column table of a flat dict (nested values as JSON)."""
    rows = []
    for key, value in data.items():
        shown = fmt(value) if isinstance(value, int | float | bool) or value is None else value
        if not isinstance(shown, str):
            shown = json.dumps(shown, default=str)
        rows.append((esc(key), esc(shown)))
    return table(["key", "value"], rows, left_columns=2)
