"""The run's curves as PNGs under `<run_dir>/plots/`, drawn to be read by a person.

Every figure has a title, labelled axes, whole-number iteration ticks and a legend in words (the raw metric key
is in the figure's texts nowhere). `success.png` holds the whole story of the run's result: the training
episodes' success, the selection evaluation that picks the best checkpoint, the held-out evaluation of the
start, best and final policies (tasks the selection never saw), and the chosen checkpoint marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

HELD_OUT_LABELS = ("start", "best", "final")


@dataclass(frozen=True)
class Figure:
    """One PNG: its title, y-axis label, and the curves (metric key -> legend text)."""

    title: str
    ylabel: str
    curves: dict[str, str]
    unit_range: bool = False  # a rate in [0, 1]: the y-axis shows all of it


FIGURES = {
    "success": Figure(
        "Success rate",
        "success rate",
        {
            "rollout/success_rate": "training episodes (sampled)",
            "eval/success_rate": "selection evaluation (picks the best)",
        },
        unit_range=True,
    ),  # fmt: skip
    "reward": Figure(
        "Mean episode reward",
        "mean reward",
        {"rollout/reward_mean": "training episodes", "eval/reward_mean": "selection evaluation"},
    ),
    "loss": Figure("Policy loss", "loss (per token)", {"learn/loss": "policy loss"}),
    "clip_fraction": Figure(
        "Clipped tokens", "fraction of tokens clipped", {"learn/clip_fraction": "PPO ratio clipped"}
    ),
    "kl": Figure(
        "KL to the sampling policy", "KL estimate (k3)", {"learn/kl_old_k3": "KL(sampling ‖ updated)"}
    ),
}


def held_out_points(rows: list[dict[str, Any]], metric: str = "success_rate") -> dict[str, tuple[int, float]]:
    """label -> (iteration, value) of the held-out evaluation (the newest row that has it)."""
    points: dict[str, tuple[int, float]] = {}
    for row in rows:
        for label in HELD_OUT_LABELS:
            value, iteration = row.get(f"held_out/{label}/{metric}"), row.get(f"held_out/{label}/iteration")
            if isinstance(value, int | float) and isinstance(iteration, int | float):
                points[label] = (int(iteration), float(value))
    return points


def write_plots(run_dir: Path, rows: list[dict[str, Any]], best: tuple[int, float] | None) -> list[Path]:
    """Write one PNG per figure that has data into `run_dir/plots/`; returns the paths written.

    `best` is the chosen checkpoint (iteration, selection value), marked on the success plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (run_dir / "plots").mkdir(exist_ok=True)
    written = []
    for name, figure in FIGURES.items():
        fig = draw(figure, rows, best if name == "success" else None, name == "success")
        if fig is not None:
            path = run_dir / "plots" / f"{name}.png"
            fig.savefig(path, dpi=100)
            written.append(path)
            plt.close(fig)
    return written


def draw(figure: Figure, rows: list[dict[str, Any]], best: tuple[int, float] | None, held_out: bool):
    """The matplotlib figure of `figure` over `rows` (None when no curve has a point)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = False
    for key, label in figure.curves.items():
        pts = sorted(
            (int(r["iteration"]), float(r[key]))
            for r in rows
            if isinstance(r.get(key), int | float) and _is_curve_row(r, key)
        )
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", markersize=3, label=label)
            drawn = True
    if held_out:
        drawn = _draw_held_out(ax, rows) or drawn
    if not drawn:
        plt.close(fig)
        return None
    if best is not None:
        ax.axvline(best[0], color="grey", linestyle="--", linewidth=1)
        ax.plot([best[0]], [best[1]], marker="*", markersize=14, color="tab:red", linestyle="none",
                label=f"chosen checkpoint (iteration {best[0]})")  # fmt: skip
    ax.set_title(figure.title)
    ax.set_xlabel("iteration")
    ax.set_ylabel(figure.ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if figure.unit_range:
        ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _is_curve_row(row: dict[str, Any], key: str) -> bool:
    """A training row carries `rollout/*` and `learn/*`; an evaluation row (no `rollout/count`) `eval/*`."""
    return key.startswith("eval/") != ("rollout/count" in row)


def _draw_held_out(ax, rows: list[dict[str, Any]]) -> bool:
    points = held_out_points(rows)
    if not points:
        return False
    ordered = sorted({(it, value, label) for label, (it, value) in points.items()})
    names = {label for *_, label in ordered}
    xs = [it for it, *_ in ordered]
    ys = [value for _, value, _ in ordered]
    ax.plot(xs, ys, marker="s", markersize=6, linestyle=":", color="tab:green",
            label=f"held out ({', '.join(n for n in HELD_OUT_LABELS if n in names)}; unseen tasks)")  # fmt: skip
    return True
