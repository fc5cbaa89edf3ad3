"""loop_agents/eval/stats.py on hand-computed cases: pass@k against its closed form and a count of subsets, the
bootstrap interval's coverage on a known binomial and its exact ends where the resampling law is known, the
paired difference on a constructed pair, the variance components and the interval they predict; rliable's IQM,
interval and P(improvement) on fixed tables, the interval checked against the stratified bootstrap written out
from the paper's definition."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from loop_agents.eval.stats import (
    Interval,
    VarianceComponents,
    bootstrap_mean,
    improvement_probability,
    iqm,
    iqm_interval,
    mean_pass_at_k,
    paired_difference,
    pass_at_k,
    variance_components,
)


def _subset_share(n: int, c: int, k: int) -> float:
    """The share of the k-subsets of n samples (the first c correct) holding a correct one, by enumeration."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_is_the_closed_form_and_the_subset_count() -> None:
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(4, 1, 3) == pytest.approx(1 - 1 / 4)  # 1 - C(3,3)/C(4,3)
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(3, 3, 1) == 1.0
    assert pass_at_k(6, 5, 2) == 1.0  # n - c < k: every pair holds a correct sample
    for n in range(1, 8):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)  # pass@1 is avg@k
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_subset_share(n, c, k))
    assert mean_pass_at_k([(4, 1), (4, 0), (4, 4)], 2) == pytest.approx((0.5 + 0 + 1) / 3)
    for bad in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def _binomial_quantile(n: int, p: float, q: float) -> int:
    """The smallest j with P(Binomial(n, p) <= j) >= q."""
    total = 0.0
    for j in range(n + 1):
        total += math.comb(n, j) * p**j * (1 - p) ** (n - j)
        if total >= q - 1e-12:
            return j
    return n


def test_bootstrap_interval_ends_are_the_binomial_quantiles_of_the_resampling_law() -> None:
    # 50 failures and 50 successes: a resample's mean is Binomial(100, 0.5) / 100
    got = bootstrap_mean([0.0] * 50 + [1.0] * 50, reps=40_000)
    assert got.mean == 0.5 and got.n == 100
    assert got.low == pytest.approx(_binomial_quantile(100, 0.5, 0.025) / 100, abs=0.011)  # 0.40
    assert got.high == pytest.approx(_binomial_quantile(100, 0.5, 0.975) / 100, abs=0.011)  # 0.60
    same = bootstrap_mean([0.7] * 12)
    assert (same.mean, same.low, same.high) == pytest.approx((0.7, 0.7, 0.7))
    assert bootstrap_mean([0.2, 0.9, 0.4], seed=3) == bootstrap_mean([0.2, 0.9, 0.4], seed=3)
    with pytest.raises(ValueError):
        bootstrap_mean([])


def test_bootstrap_interval_covers_a_known_binomial_95_percent_of_the_time() -> None:
    """1,000 evaluations of 100 tasks with p = 0.314 (off the 0.01 lattice, so the ends cannot sit on it): the 95 %
    interval holds p in 93.5-97 % of them (a 90 % interval gives 0.90, a 99 % one 0.99; standard error 0.007)."""
    rng = np.random.default_rng(2021)
    p, trials = 0.314, 1_000
    hits = 0
    for trial in range(trials):
        outcomes = (rng.random(100) < p).astype(float)
        interval = bootstrap_mean(outcomes, reps=2_000, seed=trial)
        hits += interval.low <= p <= interval.high
    assert 0.935 <= hits / trials <= 0.97, hits / trials


def test_paired_difference_on_a_constructed_pair() -> None:
    a = {"t1": 0.2, "t2": 0.5, "t3": 0.9}
    shifted = paired_difference(a, {t: v + 0.1 for t, v in a.items()})
    # every task moved by exactly 0.1: every resample's mean difference is 0.1, however different the tasks are
    assert (shifted.mean, shifted.low, shifted.high, shifted.n) == pytest.approx((0.1, 0.1, 0.1, 3))
    # differences 0 and 1: a resample's mean is 0, 0.5 or 1 with chance 1/4, 1/2, 1/4 -> ends 0 and 1
    two = paired_difference({"x": 0.0, "y": 0.0}, {"x": 0.0, "y": 1.0})
    assert (two.mean, two.low, two.high) == (0.5, 0.0, 1.0)
    with pytest.raises(ValueError, match="same tasks"):
        paired_difference({"x": 0.0}, {"y": 1.0})


def test_variance_components_on_a_hand_computed_table() -> None:
    # 4 tasks x 2 runs: task means 1, 0, 0.5, 0.5 (variance ddof 1: 0.5 / 3 = 1/6); run-to-run variances 0, 0,
    # 0.5, 0.5 (mean 0.25 = σ_w²); σ_b² = 1/6 - 0.25 / 2 = 1/24
    parts = variance_components([[1, 1], [0, 0], [1, 0], [0, 1]])
    assert (parts.between, parts.within, parts.tasks, parts.runs) == pytest.approx((1 / 24, 0.25, 4, 2))
    # 30 tasks x 4 runs: 1.96 * sqrt((1/24 + 0.25/4) / 30) = 0.11544
    assert parts.half_width(30, 4) == pytest.approx(1.959964 * math.sqrt((1 / 24 + 1 / 16) / 30), rel=1e-6)
    # every task the same: σ_b² 0 and the bound is the binomial one, 1.96 * 0.5 / sqrt(n k)
    coin = VarianceComponents(between=0.0, within=0.25, tasks=2, runs=2)
    assert coin.half_width(400, 1) == pytest.approx(1.959964 * 0.5 / 20, rel=1e-6)  # 0.049
    assert coin.runs_for(100, 0.05) == 4  # 1.96 * 0.5 / sqrt(400) = 0.049; 3 runs give 0.0566
    assert coin.runs_for(30, 0.08) == 6  # 5 runs give 0.0800150
    assert coin.tasks_for(0.05, runs=1) == 385  # 1.96² * 0.25 / 0.05² = 384.1
    assert parts.tasks_for(0.08, runs=4) == 63  # 1.96² * (1/24 + 1/16) / 0.08² = 62.5
    # σ_b² alone already wider than asked (limit 1.96 * sqrt(0.2 / 30) = 0.16): no number of runs reaches it
    assert VarianceComponents(0.2, 0.05, 30, 4).runs_for(30, 0.08) is None
    with pytest.raises(ValueError, match="2 runs"):
        variance_components([[1], [0]])


def test_the_predicted_half_width_matches_the_bootstrap_on_simulated_evaluations() -> None:
    """Tasks with success rates drawn from Beta(1, 1) (σ_b² = 1/12), each played k runs: the task bootstrap's
    half-width over many simulated evaluations is close to z·sqrt((σ_b² + σ_w²/k) / n), σ_w² = E[p(1-p)] = 1/6.
    Measured 2-6 % narrower (0.168 / 0.123 / 0.079 against 0.179 / 0.127 / 0.080): the bootstrap resamples with
    the plug-in variance, (n-1)/n of the unbiased one, and its percentile ends fall on a grid of 1/(n k)."""
    rng = np.random.default_rng(3)
    for tasks, runs in ((30, 1), (30, 4), (100, 2)):
        widths = []
        for _ in range(200):
            p = rng.uniform(size=tasks)
            table = rng.uniform(size=(tasks, runs)) < p[:, None]
            interval = bootstrap_mean(table.mean(axis=1), reps=2_000, seed=int(rng.integers(1 << 30)))
            widths.append((interval.high - interval.low) / 2)
        predicted = VarianceComponents(1 / 12, 1 / 6, tasks, runs).half_width(tasks, runs)
        assert 0.90 * predicted < np.mean(widths) <= predicted, (tasks, runs)


# ---------------------------------------------------------------------------------------- rliable
TABLE = np.array([[0.1, 0.9], [0.4, 0.6], [0.2, 0.8], [0.3, 1.0]])  # 4 runs x 2 tasks


def test_iqm_is_the_mean_of_the_middle_half_of_all_scores() -> None:
    assert iqm(list(range(1, 9))) == pytest.approx(4.5)  # drop 1, 2 and 7, 8: mean of 3..6
    # the 8 scores sorted: 0.1 0.2 0.3 0.4 | 0.6 0.8 0.9 1.0 -> the middle four 0.3 0.4 0.6 0.8
    assert iqm(TABLE) == pytest.approx((0.3 + 0.4 + 0.6 + 0.8) / 4)
    with pytest.raises(ValueError):
        iqm([])


def test_probability_of_improvement_counts_pairs_with_ties_as_half() -> None:
    # x 3 4 5 over y 1 2 4: 3 beats 2 of y, 4 beats 2 and ties 1, 5 beats 3 -> 7.5 of 9 pairs
    one = improvement_probability([3.0, 4.0, 5.0], [1.0, 2.0, 4.0], reps=200)
    assert one.mean == pytest.approx(7.5 / 9) and one.n == 6
    # per task then averaged: task 0 as above, task 1 identical runs -> 0.5
    two = improvement_probability([[3, 7], [4, 7], [5, 7]], [[1, 7], [2, 7], [4, 7]], reps=200)
    assert two.mean == pytest.approx((7.5 / 9 + 0.5) / 2)
    every = improvement_probability([0.8, 0.9, 0.95], [0.1, 0.2, 0.3], reps=500)
    assert (every.mean, every.low, every.high) == (1.0, 1.0, 1.0)  # every resample: all X above all Y
    with pytest.raises(ValueError, match="same tasks"):
        improvement_probability([[1, 2]], [[1, 2, 3]])


def _stratified_iqm_interval(table: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """Agarwal et al. 2021, stratified bootstrap: resample the runs of each task with replacement, IQM, 2.5/97.5 %."""
    rng = np.random.default_rng(seed)
    runs, tasks = table.shape
    values = []
    for _ in range(reps):
        picked = rng.integers(0, runs, size=(runs, tasks))
        sample = table[picked, np.arange(tasks)[None, :]]
        flat = np.sort(sample, axis=None)
        cut = int(0.25 * flat.size)
        values.append(flat[cut : flat.size - cut].mean())
    low, high = np.quantile(values, [0.025, 0.975])
    return float(low), float(high)


def test_iqm_interval_is_rliables_stratified_bootstrap() -> None:
    state = np.random.get_state()
    got = iqm_interval(TABLE, reps=5_000, seed=1)
    assert np.array_equal(np.random.get_state()[1], state[1])  # numpy's global generator left as it was
    assert got.mean == pytest.approx(iqm(TABLE)) and got.n == 4
    low, high = _stratified_iqm_interval(TABLE, 5_000, seed=7)
    assert got.low == pytest.approx(low, abs=0.02) and got.high == pytest.approx(high, abs=0.02)
    assert got.low < got.mean < got.high
    assert iqm_interval(TABLE, reps=500, seed=4) == iqm_interval(TABLE, reps=500, seed=4)
    flat = iqm_interval([0.5] * 6, reps=200)
    assert (flat.low, flat.high) == pytest.approx((0.5, 0.5))


def test_an_interval_reads_back_from_a_results_file_and_prints_signed_for_differences():
    stored = {"mean": 0.1167, "low": -0.0208, "high": 0.2125, "n": 60, "tasks": 60}  # extra keys are ignored
    interval = Interval.from_dict(stored)
    assert interval == Interval(0.1167, -0.0208, 0.2125, 60)
    assert interval.text(3) == "0.117 [-0.021, 0.212]"
    assert interval.text(3, signed=True) == "+0.117 [-0.021, +0.212]"
    assert Interval(57.2, 52.6, 61.0, 17).text(0, signed=True) == "+57 [+53, +61]"


def test_wilson_interval_on_hand_computed_values() -> None:
    """0.76 over 400: z = 1.95996, z²/n = 0.0096036; center (0.76 + 0.0048018) / 1.0096036 = 0.757527; half
    1.95996 * sqrt(0.76 * 0.24 / 400 + 3.841459 / 640000) / 1.0096036 = 0.041727. 0 over 10: the upper end is
    (z²/n) / (1 + z²/n) = 0.384146 / 1.384146 = 0.277532, the lower 0."""
    from loop_agents.eval.stats import wilson_interval

    interval = wilson_interval(0.76, 400)
    assert interval.low == pytest.approx(0.757527 - 0.041727, abs=2e-6)
    assert interval.high == pytest.approx(0.757527 + 0.041727, abs=2e-6)
    none = wilson_interval(0.0, 10)
    assert none.low == pytest.approx(0.0, abs=1e-12) and none.high == pytest.approx(0.277532, abs=1e-6)
    assert wilson_interval(1.0, 10).high == 1.0
    with pytest.raises(ValueError, match="over n >= 1"):
        wilson_interval(0.5, 0)
