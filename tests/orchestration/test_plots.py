"""The run's plots, read back from matplotlib: titles, axis labels, whole iterations, words not metric keys,
the held-out points and the chosen checkpoint on the success plot."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loop_agents.orchestration.plots import FIGURES, draw, held_out_points  # noqa: E402
from loop_agents.orchestration.run_log import RunLog  # noqa: E402


def _rows() -> list[dict]:
    rows: list[dict] = [{"iteration": 0, "time/sft": 1.0}]
    for it in range(1, 7):
        rows.append({"iteration": it, "rollout/count": 8.0, "rollout/success_rate": it / 10,
                     "rollout/reward_mean": it / 10, "learn/loss": 1.0 / it})  # fmt: skip
    for it in (0, 3, 6):
        rows.append({"iteration": it, "eval/success_rate": 0.2 + it / 20, "eval/reward_mean": 0.1})
    rows.append({"iteration": 6, "held_out/start/success_rate": 0.15, "held_out/start/iteration": 0,
                 "held_out/best/success_rate": 0.45, "held_out/best/iteration": 3,
                 "held_out/final/success_rate": 0.4, "held_out/final/iteration": 6})  # fmt: skip
    return rows


def _texts(fig) -> list[str]:
    ax = fig.axes[0]
    return [
        ax.get_title(),
        ax.get_xlabel(),
        ax.get_ylabel(),
        *(t.get_text() for t in ax.get_legend().get_texts()),
    ]


def test_success_plot_reads_as_words_with_held_out_and_the_choice():
    fig = draw(FIGURES["success"], _rows(), best=(3, 0.35), held_out=True)
    ax = fig.axes[0]
    texts = _texts(fig)
    assert texts[:3] == ["Success rate", "iteration", "success rate"]
    assert texts[3:] == [
        "training episodes (sampled)",
        "selection evaluation (picks the best)",
        "held out (start, best, final; unseen tasks)",
        "chosen checkpoint (iteration 3)",
    ]
    assert not any("/" in t or "_" in t for t in texts)  # no raw metric keys
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
    held = next(line for line in ax.get_lines() if line.get_label().startswith("held out"))
    assert list(held.get_xdata()) == [0, 3, 6] and list(held.get_ydata()) == [0.15, 0.45, 0.4]
    assert any(line.get_xdata()[0] == 3 and line.get_linestyle() == "--" for line in ax.get_lines())
    plt.close(fig)


def test_every_figure_has_labelled_axes(tmp_path: Path):
    for figure in FIGURES.values():
        fig = draw(figure, _rows(), best=None, held_out=False)
        if fig is None:  # no data for it in these rows (clip fraction, KL)
            continue
        ax = fig.axes[0]
        assert ax.get_xlabel() == "iteration" and ax.get_ylabel() and ax.get_title()
        assert not any("/" in t for t in _texts(fig))
        plt.close(fig)


def test_held_out_points_and_run_log_writes_the_pngs(tmp_path: Path):
    assert held_out_points(_rows()) == {"start": (0, 0.15), "best": (3, 0.45), "final": (6, 0.4)}
    log = RunLog(tmp_path)
    log.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    best = tmp_path / "checkpoints" / "best"
    best.mkdir(parents=True)
    (best / "eval.json").write_text(json.dumps({"iteration": 3, "value": 0.35}))
    names = sorted(p.name for p in log.plot())
    assert names == ["loss.png", "reward.png", "success.png"]
