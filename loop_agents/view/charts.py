"""Inline SVG line charts (no JS, no plotting library) for the run index."""

from __future__ import annotations

from collections.abc import Sequence

from loop_agents.view.html import esc

WIDTH, HEIGHT, PAD = 300, 150, 30


def line_chart(title: str, points: Sequence[tuple[float, float]]) -> str:
    """A polyline of (x, y) points with the min/max of both axes written on it."""
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    x_span, y_span = (x1 - x0) or 1.0, (y1 - y0) or 1.0

    def sx(x: float) -> float:
        return PAD + (x - x0) / x_span * (WIDTH - 2 * PAD)

    def sy(y: float) -> float:
        return HEIGHT - PAD + 10 - (y - y0) / y_span * (HEIGHT - 2 * PAD)

    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    dots = "".join(
        f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2"><title>{x:g}: {y:.4g}</title></circle>'
        for x, y in points
    )
    return (
        f'<svg class="chart" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img">'
        f'<text x="{PAD}" y="14" font-size="12">{esc(title)}</text>'
        f'<text x="2" y="{HEIGHT - PAD + 10}" font-size="10">{y0:.3g}</text>'
        f'<text x="2" y="{PAD + 10}" font-size="10">{y1:.3g}</text>'
        f'<text x="{PAD}" y="{HEIGHT - 4}" font-size="10">{x0:g}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 4}" font-size="10" text-anchor="end">{x1:g}</text>'
        f'<polyline fill="none" stroke="#0969da" stroke-width="1.5" points="{path}"/>{dots}</svg>'
    )
