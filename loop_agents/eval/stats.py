"""The statistics behind every reported evaluation number and every aggregate over seeds (numpy only here).

Over the tasks of one evaluation (`scripts/evaluate.py`, the evaluator actor):
- `bootstrap_mean`: percentile bootstrap of a mean over units (tasks, or scenarios for SGC). With task means
  x_1..x_n (each task's mean over its k runs), draw B resamples of n tasks with replacement; the interval is the
  (α/2, 1 - α/2) quantiles of the B resampled means (Efron & Tibshirani 1993, §13.3).
- `pass_at_k`: the unbiased estimator of Chen et al. 2021 (HumanEval), pass@k = 1 - C(n-c, k) / C(n, k) for a
  task with c successes in n ≥ k samples, averaged over tasks; avg@k is the mean over tasks of c / n.
- `paired_difference`: d_i = b_i - a_i per task (same tasks, same runs), then `bootstrap_mean` over the d_i.
- `wilson_interval`: Wilson's score interval of one success rate over n episodes (one per task, as the held-out
  evaluations run them).
- `variance_components`: success split into between-task σ_b² and run-to-run σ_w² variance; the interval on n
  tasks × k runs is then about z·sqrt((σ_b² + σ_w²/k) / n), so runs per task only shrink the second term.

Over runs (seeds) of a training recipe, as rliable computes them (Agarwal et al., NeurIPS 2021; imported lazily):
- `iqm`: the interquartile mean, the mean of the middle 50 % of all run × task scores
  (scipy.stats.trim_mean(scores, 0.25, axis=None)).
- `improvement_probability`: P(X > Y) = mean over tasks m of P(X_m > Y_m) + ½ P(X_m = Y_m), the Mann-Whitney U
  statistic of task m's runs over num_runs_x · num_runs_y.
- Their intervals: rliable's stratified bootstrap (resample runs within each task; percentile interval).
(The name is not `statistics`: a script run from this folder would shadow the standard library's module.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

REPS = 10_000  # bootstrap resamples over tasks (fast: one vectorised draw)
CONFIDENCE = 0.95
# resamples over runs: rliable's default is 50,000 for aggregates and its examples take 2,000 for P(improvement)
# (each of its resamples runs a Mann-Whitney U per task); fewer keep a report within seconds
RUN_REPS = 5_000
POI_REPS = 2_000


@dataclass(frozen=True)
class Interval:
    """A point estimate, its interval [low, high] and the number of units n it resampled."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def from_dict(cls, values: Mapping[str, float]) -> Interval:
        """The interval a results file holds as {"mean", "low", "high", "n", ...} (other keys ignored)."""
        return cls(values["mean"], values["low"], values["high"], int(values["n"]))

    def text(self, digits: int = 2, signed: bool = False) -> str:
        """`0.62 [0.55, 0.70]`; signed, for differences: `+0.12 [+0.04, +0.20]`."""
        spec = f"{'+' if signed else ''}.{digits}f"
        return f"{self.mean:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def bootstrap_mean(
    values: Sequence[float], confidence: float = CONFIDENCE, reps: int = REPS, seed: int = 0
) -> Interval:
    """Percentile-bootstrap interval of the mean of `values` (one value per unit, e.g. a task's mean success)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("bootstrap_mean needs a non-empty 1-D sequence of values")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must be in (0, 1)")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(reps, x.size))].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Interval(float(x.mean()), float(low), float(high), int(x.size))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021: 1 - C(n-c, k) / C(n, k), the chance that k of the n samples (c correct) hold one correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """pass@k averaged over tasks; counts holds (n samples, c correct) per task, every n >= k."""
    if not counts:
        raise ValueError("mean_pass_at_k needs at least one task")
    return sum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def paired_difference(
    a: Mapping[str, float],
    b: Mapping[str, float],
    confidence: float = CONFIDENCE,
    reps: int = REPS,
    seed: int = 0,
) -> Interval:
    """mean over tasks of b_t - a_t, with the bootstrap interval over tasks; both must score the same tasks."""
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(
            f"a paired difference needs the same tasks on both sides; {len(only)} differ: {only[:3]}"
        )
    tasks = sorted(a)
    return bootstrap_mean([b[t] - a[t] for t in tasks], confidence, reps, seed)


def z_value(confidence: float = CONFIDENCE) -> float:
    """The two-sided normal quantile: 1.96 at 95 %."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(rate: float, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson's score interval of a success rate over n independent episodes (one per task):
    (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n) (Wilson 1927; Brown, Cai & DasGupta 2001)."""
    if n < 1 or not 0.0 <= rate <= 1.0:
        raise ValueError(f"a success rate in [0, 1] over n >= 1 episodes, got {rate} over {n}")
    z = z_value(confidence)
    scale = 1 + z * z / n
    center = (rate + z * z / (2 * n)) / scale
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / scale
    return Interval(rate, max(0.0, center - half), min(1.0, center + half), n)


@dataclass(frozen=True)
class VarianceComponents:
    """One-way random-effects split of per-episode success: between tasks σ_b², within a task (run to run) σ_w²."""

    between: float
    within: float
    tasks: int
    runs: int

    def half_width(self, tasks: int, runs: int, confidence: float = CONFIDENCE) -> float:
        """z·sqrt((σ_b² + σ_w²/k) / n): the interval half-width of mean success on n tasks × k runs each."""
        if tasks < 1 or runs < 1:
            raise ValueError(f"half_width needs tasks >= 1 and runs >= 1 (tasks={tasks}, runs={runs})")
        return z_value(confidence) * math.sqrt((self.between + self.within / runs) / tasks)

    def runs_for(self, tasks: int, half_width: float, confidence: float = CONFIDENCE) -> int | None:
        """The fewest runs per task k whose half-width on `tasks` tasks is <= half_width; None when no k reaches
        it (z·sqrt(σ_b²/n), the limit as k grows, is already wider: only more tasks help)."""
        z = z_value(confidence)
        room = (half_width / z) ** 2 * tasks - self.between
        if room <= 0:
            return None
        return max(1, math.ceil(self.within / room - 1e-9))

    def tasks_for(self, half_width: float, runs: int, confidence: float = CONFIDENCE) -> int:
        """The fewest tasks n whose half-width at `runs` runs each is <= half_width: z²(σ_b² + σ_w²/k) / hw²."""
        z = z_value(confidence)
        return max(1, math.ceil(z * z * (self.between + self.within / runs) / half_width**2 - 1e-9))


def variance_components(table: Sequence[Sequence[float]] | np.ndarray) -> VarianceComponents:
    """σ_w² = the mean over tasks of each task's run-to-run variance (MSW, ddof 1); σ_b² = max(0, the variance of
    the task means (ddof 1) - σ_w²/k), the ANOVA estimators of a balanced tasks × k-runs table (Searle et al.,
    Variance Components, 1992, §3.5). More runs shrink only σ_w²/k: with σ_b² large, only more tasks help."""
    x = np.asarray(table, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise ValueError(f"variance_components needs >= 2 tasks x >= 2 runs; got shape {x.shape}")
    within = float(x.var(axis=1, ddof=1).mean())
    between = max(0.0, float(x.mean(axis=1).var(ddof=1)) - within / x.shape[1])
    return VarianceComponents(between, within, x.shape[0], x.shape[1])


# ---------------------------------------------------------------------------------------- over runs (rliable)
def _table(scores: Sequence[float] | Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """runs × tasks; a flat sequence is one task's runs."""
    table = np.asarray(scores, dtype=float)
    table = table[:, None] if table.ndim == 1 else table
    if table.ndim != 2 or table.size == 0 or not np.isfinite(table).all():
        raise ValueError("scores must be a non-empty runs x tasks table of finite numbers")
    return table


@contextmanager
def _numpy_seed(seed: int) -> Iterator[None]:
    """rliable's bootstrap draws from numpy's global generator: seed it for this block, then restore it."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def iqm(scores: Sequence[float] | Sequence[Sequence[float]] | np.ndarray) -> float:
    """rliable's aggregate_iqm: the 25 %-trimmed mean of every run × task score."""
    from rliable import metrics

    return float(metrics.aggregate_iqm(_table(scores)))


def _rliable_interval(
    data: np.ndarray | list[np.ndarray], func: Callable[..., float], reps: int, seed: int, confidence: float
) -> tuple[float, float, float]:
    from rliable import library

    with _numpy_seed(seed):
        points, intervals = library.get_interval_estimates(
            {"x": data}, lambda *a: np.array([func(*a)]), reps=reps, confidence_interval_size=confidence
        )
    return float(points["x"][0]), float(intervals["x"][0, 0]), float(intervals["x"][1, 0])


def iqm_interval(
    scores: Sequence[float] | Sequence[Sequence[float]] | np.ndarray,
    reps: int = RUN_REPS,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> Interval:
    """IQM over runs with rliable's stratified-bootstrap interval; n = the number of runs."""
    from rliable import metrics

    table = _table(scores)
    point, low, high = _rliable_interval(table, metrics.aggregate_iqm, reps, seed, confidence)
    return Interval(point, low, high, table.shape[0])


def improvement_probability(
    x: Sequence[float] | Sequence[Sequence[float]] | np.ndarray,
    y: Sequence[float] | Sequence[Sequence[float]] | np.ndarray,
    reps: int = POI_REPS,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> Interval:
    """rliable's P(X > Y) with the interval of its stratified independent bootstrap; n = runs of X + runs of Y."""
    from rliable import metrics

    tx, ty = _table(x), _table(y)
    if tx.shape[1] != ty.shape[1]:
        raise ValueError(f"X has {tx.shape[1]} tasks and Y {ty.shape[1]}: P(X > Y) compares the same tasks")
    point, low, high = _rliable_interval([tx, ty], metrics.probability_of_improvement, reps, seed, confidence)
    return Interval(point, low, high, tx.shape[0] + ty.shape[0])
