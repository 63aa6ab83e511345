"""harness.compare.significance: a ratio word only with a significant Welch test."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats

from harness.compare.significance import compare_samples, welch_p_value


def _welch_by_hand(a: list[float], b: list[float]) -> float:
    """Welch's t and Satterthwaite's df written out, p from the t distribution's tail."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return float(2 * stats.t.sf(abs(t), df))


def test_p_value_matches_the_formula():
    rng = np.random.default_rng(3)
    for _ in range(20):
        a = list(rng.normal(1.0, 0.05, rng.integers(2, 10)))
        b = list(rng.normal(1.03, 0.12, rng.integers(2, 10)))
        assert welch_p_value(a, b) == pytest.approx(_welch_by_hand(a, b), rel=1e-9)


def test_clear_slowdown_is_called_slower_with_its_evidence():
    a = [0.451, 0.449, 0.452, 0.450, 0.453, 0.448]
    b = [0.536, 0.534, 0.539, 0.535, 0.537, 0.533]
    t = compare_samples(a, b, what="DiT s/step")
    assert t.outcome == "slower" and t.significant
    assert t.ratio == pytest.approx(statistics.fmean(b) / statistics.fmean(a))
    assert t.words.startswith("1.19x slower (n=6/6 runs, p=") and t.words.endswith(", alpha 0.05)")
    assert t.line().startswith("DiT s/step: 0.451 ± 0.002 s (n=6) -> 0.536 ± 0.002 s (n=6): 1.19x slower")
    assert compare_samples(b, a).words.startswith("1.19x faster")


def test_noise_as_large_as_the_difference_is_not_significant():
    # the floor arm's totals: same kernel, 0.94x..1.13x of the reference
    a = [3.29, 3.10, 3.45]
    b = [3.03, 3.52, 3.21]
    t = compare_samples(a, b, what="pipeline total")
    assert t.outcome == "no_difference" and not t.significant
    assert t.words.startswith("no significant difference (n=3/3 runs, p=")
    assert "faster" not in t.line() and "slower" not in t.line()


def test_one_run_each_gives_no_ratio_word():
    t = compare_samples([0.451], [0.536])
    assert t.outcome == "too_few" and t.ratio == pytest.approx(0.536 / 0.451)
    assert t.words == "too few samples for a test (n=1/1 runs; 2 a side needed)"
    assert "slower" not in t.line()


def test_identical_and_constant_samples():
    assert compare_samples([1.0, 1.0], [1.0, 1.0]).outcome == "no_difference"
    assert compare_samples([1.0, 1.0], [2.0, 2.0]).outcome == "slower"  # a difference that never varies
    assert compare_samples([], [1.0]).outcome == "not_measured"
    assert compare_samples([1.0, None, math.nan, 1.1], [1.0, 1.1]).n_a == 2


def test_level_is_stated_and_used():
    rng = np.random.default_rng(1)
    a, b = list(rng.normal(1.0, 0.02, 5)), list(rng.normal(1.03, 0.02, 5))
    p = welch_p_value(a, b)
    assert 0.001 < p < 0.05
    assert compare_samples(a, b, alpha=0.05).significant
    loose = compare_samples(a, b, alpha=0.001)
    assert not loose.significant and "alpha 0.001" in loose.words
