"""harness.compare.significance: the speed-up (reference time / arm time) with its interval over runs,
a speed word only when the interval clears the minimum effect and the Holm-adjusted test rejects;
the word never contradicts the (unadjusted) interval printed beside it; zero spread claims nothing."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.compare.significance import (
    SpeedTest,
    compare_blocked,
    compare_pairs,
    compare_samples,
    fmt_p,
    holm_tests,
    one_run_each,
)
from harness.number_format import percent_text
from harness.rule import holm, welch_p_value


def test_welch_on_log_times_matches_scipy_and_the_interval_its_formula():
    rng = np.random.default_rng(3)
    for _ in range(10):
        a = list(np.exp(rng.normal(0.0, 0.05, rng.integers(2, 10))))
        b = list(np.exp(rng.normal(0.03, 0.12, rng.integers(2, 10))))
        t = compare_samples(a, b)
        la, lb = np.log(a), np.log(b)
        assert t.p == pytest.approx(stats.ttest_ind(la, lb, equal_var=False).pvalue, rel=1e-9)
        va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
        df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
        d, q = la.mean() - lb.mean(), stats.t.ppf(0.975, df)
        assert t.speedup == pytest.approx(math.exp(d))
        assert t.speedup_ci == pytest.approx(
            [math.exp(d - q * math.sqrt(va + vb)), math.exp(d + q * math.sqrt(va + vb))]
        )


def test_paired_runs_use_the_log_ratios():
    pairs = [(0.451, 0.536), (0.449, 0.534), (0.455, 0.539), (0.450, 0.535)]
    t = compare_pairs(pairs, what="DiT s/step")
    d = [math.log(r / a) for r, a in pairs]
    se = statistics.stdev(d) / 2
    q = stats.t.ppf(0.975, 3)
    assert t.design == "paired by seed and repeat" and t.n_pairs == 4 and t.df == 3
    assert t.speedup == pytest.approx(math.exp(statistics.fmean(d)))
    assert t.speedup_ci == pytest.approx(
        [math.exp(statistics.fmean(d) - q * se), math.exp(statistics.fmean(d) + q * se)]
    )
    assert t.word == "slower" and t.speedup < 1
    assert t.line.startswith(
        "DiT s/step: 0.451 ± 0.003 s (n=4) -> 0.536 ± 0.002 s (n=4): speed-up 0.842x (95 % CI 0.839 to 0.844; n=4/4 runs"
    )
    assert "n=4/4 runs, paired by seed and repeat): slower (p=" in t.line


def test_blocked_by_seed_pools_the_within_seed_variance():
    blocks = [([1.00, 1.02, 0.98], [0.50]), ([2.00, 2.04, 1.96], [1.01])]
    t = compare_blocked(blocks)
    logs = [np.log(x) for r, a in blocks for x in (r, a)]
    ss = sum(((x - x.mean()) ** 2).sum() for x in logs)
    s2 = ss / (2 + 0 + 2 + 0)
    d = statistics.fmean(np.log(r).mean() - np.log(a).mean() for r, a in blocks)
    se = math.sqrt(s2 * sum(1 / len(r) + 1 / len(a) for r, a in blocks)) / 2
    assert t.design == "blocked by seed" and t.df == 4 and t.speedup == pytest.approx(math.exp(d))
    q = stats.t.ppf(0.975, 4)
    assert t.speedup_ci == pytest.approx([math.exp(d - q * se), math.exp(d + q * se)])
    assert t.word == "faster"


def test_a_tiny_difference_is_no_meaningful_difference_not_slower():
    # 0.451 vs 0.452 s with a little spread: significant, but inside the minimum effect
    t = compare_samples([0.4510, 0.4511, 0.4509, 0.4510], [0.4520, 0.4521, 0.4519, 0.4520])
    assert t.p < 1e-4 and t.word == "no meaningful difference"
    assert "minimum effect 1%" in t.line and "slower" not in t.line


CLAIMS = ("faster", "slower", "no meaningful difference", "no difference detected")


def test_zero_spread_on_both_sides_claims_nothing():
    """Identical timings read "no meaningful difference (CI 1-1)": a zero-width interval is no evidence."""
    t = compare_samples([0.451] * 3, [0.451] * 3, what="DiT s/step")
    assert t.word == "zero spread" and t.speedup == pytest.approx(1.0)
    assert t.speedup_ci is None and t.p is None and t.p_adjusted is None and not t.significant
    assert (
        t.words
        == "speed-up 1.00x: zero spread: timings identical on every run (n=3/3 runs), no interval, no claim"
    )
    assert "CI" not in t.line and not any(c in t.line for c in CLAIMS)
    holm_tests([t, compare_samples([1.0, 1.1], [1.0, 1.2])])  # no p: not in Holm's family, word kept
    assert t.word == "zero spread" and t.p_adjusted is None


def test_zero_spread_with_different_constant_sides_shows_the_ratio_only():
    t = compare_samples([1.0] * 3, [2.0] * 4)
    assert (
        t.word == "zero spread" and t.speedup == pytest.approx(0.5) and t.speedup_ci is None and t.p is None
    )
    assert (
        t.words
        == "speed-up 0.500x: zero spread: timings identical on every run (n=3/4 runs), no interval, no claim"
    )
    assert not any(c in t.line for c in CLAIMS)
    paired = compare_pairs([(1.0, 2.0), (3.0, 6.0), (5.0, 10.0)])  # every pair's ratio the same
    assert paired.word == "zero spread" and paired.speedup == pytest.approx(0.5)
    assert "zero spread: the ratio identical on every pair (n=3/3 runs), no interval, no claim" in paired.line
    blocked = compare_blocked([([1.0, 1.0], [2.0]), ([3.0, 3.0], [6.0, 6.0])])
    assert blocked.word == "zero spread" and "timings identical within every seed" in blocked.line


def test_an_interval_that_excludes_1_is_never_no_difference_detected():
    """A test not significant after Holm beside an unadjusted interval that excludes 1 read "no difference
    detected (p=0.02, Holm 0.20)": it says that Holm's correction, not the data, withholds the word."""
    ratios = [0.2, 0.3, 0.1, 0.2]  # log ratios, paired: p about 0.016, 95 % CI about 1.07-1.39
    t = compare_pairs([(math.exp(d), 1.0) for d in ratios])
    assert t.word == "faster" and t.p < 0.05 and t.speedup_ci[0] > 1.05
    others = [compare_samples([1.0, 1.1, 0.9], [1.0, 1.12, 0.88]) for _ in range(9)]
    holm_tests([t, *others])
    assert t.p_adjusted == pytest.approx(10 * t.p) and t.p_adjusted > 0.05
    assert t.word == "not significant after Holm" and t.family_size == 10 and not t.significant
    assert "no difference detected" not in t.line
    assert (
        f"not significant after Holm over 10 tests (p={fmt_p(t.p)}, Holm {fmt_p(t.p_adjusted)} over 10 tests;"
        in t.line
    )
    assert "the 95 % CI excludes 1 before the correction" in t.line


def test_a_significant_change_the_interval_cannot_size_is_no_speed_word_and_no_denial():
    """Significant after Holm but the interval reaches inside the minimum effect (CI 1.008-1.022 with 1 %):
    it read "no difference detected"; the difference is detected, its size is not."""
    t = compare_pairs([(1.0, math.exp(-x)) for x in (0.007, 0.023, 0.015, 0.009, 0.021, 0.015)])
    lo, hi = t.speedup_ci
    assert 1.0 < lo < 1.01 < hi and t.p_adjusted < 0.05
    assert t.word == "difference detected, size unclear" and not t.significant
    assert "no difference detected" not in t.line and "faster" not in t.line
    assert "the interval reaches inside the minimum effect 1%" in t.line


def _check_consistent(t: SpeedTest) -> None:
    """The word against the interval printed beside it (the unadjusted 1 - alpha interval)."""
    up, down = 1.0 + t.min_effect, 1.0 / (1.0 + t.min_effect)
    words = t.words
    assert t.line.endswith(words) or not t.measured
    if t.speedup_ci is None:
        assert t.word in ("too few runs", "zero spread") and not t.significant
        assert not any(c in words for c in CLAIMS)
        if t.word == "zero spread":
            assert "no interval, no claim" in words and t.p is None
        return
    lo, hi = t.speedup_ci
    assert 0.0 <= lo <= hi
    covers = lo <= 1.0 <= hi
    if t.word == "faster":
        assert lo > up and t.p_adjusted < t.alpha
    elif t.word == "slower":
        assert hi < down and t.p_adjusted < t.alpha
    elif t.word == "no meaningful difference":
        assert down < lo and hi < up
    elif t.word == "no difference detected":
        assert covers
    elif t.word == "not significant after Holm":
        assert not covers and t.p_adjusted >= t.alpha
    else:
        assert t.word == "difference detected, size unclear" and not covers and t.p_adjusted < t.alpha
    if not covers:
        assert "no difference detected" not in words
    if covers:
        assert t.word not in ("faster", "slower")


POSITIVE = st.floats(min_value=0.0, max_value=1e308, exclude_min=True, allow_nan=False, allow_infinity=False)
SIDE = st.one_of(
    st.lists(POSITIVE, max_size=7),
    st.builds(lambda x, n: [x] * n, POSITIVE, st.integers(1, 5)),
    st.builds(
        lambda s, fs: [s * f for f in fs], st.floats(1e-300, 1e300), st.lists(st.floats(0.5, 2.0), max_size=7)
    ),
)
RULES = st.tuples(st.sampled_from([0.05, 0.01, 1e-6]), st.sampled_from([0.0, 0.01, 0.2]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=SIDE, b=SIDE, c=SIDE, rules=RULES)
def test_words_never_contradict_the_interval(a, b, c, rules):
    alpha, min_effect = rules
    kw = {"alpha": alpha, "min_effect": min_effect}
    n = min(len(a), len(b))
    tests = [
        compare_samples(a, b, **kw),
        compare_samples(a, c, **kw),
        compare_pairs(list(zip(a[:n], b[:n], strict=True)), **kw),
        compare_blocked([(a, b), (c, a)], **kw),
        compare_blocked([(a[:1], b), (c, a)], **kw),
    ]
    for t in tests:
        _check_consistent(t)
    holm_tests(tests)  # one family: the adjusted words as well
    for t in tests:
        _check_consistent(t)
        assert t.p_adjusted is None or t.p is None or t.p_adjusted >= t.p


def test_noise_as_large_as_the_difference_says_what_it_could_detect():
    t = compare_samples([3.29, 3.10, 3.45], [3.03, 3.52, 3.21], what="pipeline total")
    assert t.word == "no difference detected" and t.detectable is not None and t.detectable > 0.05
    assert f"could detect a change of {percent_text(t.detectable)} at this n" in t.line
    assert "faster" not in t.line and "slower" not in t.line


def test_one_run_a_side_gives_the_ratio_and_no_speed_word():
    t = one_run_each(0.451, 0.536, what="DiT s/step")
    assert t.speedup == pytest.approx(0.451 / 0.536) and t.speedup_ci is None and t.word == "too few runs"
    assert "one run a side: no speed word" in t.line
    few = compare_samples([0.451], [0.536])
    assert (
        few.word == "too few runs"
        and "too few runs for an interval (n=1/1 runs; 2 a side needed)" in few.line
    )
    assert compare_samples([], [1.0]).line.endswith("no timing (n=0/1 runs)")
    assert compare_samples([1.0, None, math.nan, 1.1, -1.0], [1.0, 1.1]).n_ref == 2


def test_holm_matches_its_definition_and_changes_the_words():
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    rng = np.random.default_rng(0)
    base = list(np.exp(rng.normal(0, 0.005, 6)))
    tests = [
        compare_samples(base, [x * 1.02 * math.exp(rng.normal(0, 0.01)) for x in base]) for _ in range(3)
    ]
    single = [t.p for t in tests]
    holm_tests(tests)
    assert [t.p_adjusted for t in tests] == pytest.approx(holm(single))
    assert all("Holm" in t.line for t in tests if t.p_adjusted != t.p)


def test_identical_kernels_with_between_process_spread_rarely_get_a_word():
    """1 % between processes, 28 steps of 0.2 % inside one: testing the steps of one run a side read a
    speed word in nearly every pair; runs as samples with Holm over 3 candidates x 2 timings stay under
    the level."""
    rng = np.random.default_rng(7)
    steps_words = runs_words = 0
    trials = 300
    for _ in range(trials):
        a = 0.45 * np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.002, 28))
        b = 0.45 * np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.002, 28))
        steps_words += welch_p_value(list(a), list(b)) < 0.05  # the rule this replaces
        ref = list(0.45 * np.exp(rng.normal(0, 0.01, 9)))
        tests = [compare_samples(ref, list(0.45 * np.exp(rng.normal(0, 0.01, 9)))) for _ in range(6)]
        holm_tests(tests)
        runs_words += any(t.significant for t in tests)
    assert steps_words / trials > 0.8
    assert runs_words / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


def test_level_and_minimum_effect_are_stated_and_used():
    rng = np.random.default_rng(1)
    a, b = list(np.exp(rng.normal(0, 0.01, 6))), list(np.exp(rng.normal(-0.05, 0.01, 6)))
    assert compare_samples(a, b).word == "faster"
    assert compare_samples(a, b, min_effect=0.2).word == "no meaningful difference"  # inside 1/1.2..1.2
    strict = compare_samples(a, b, alpha=1e-6)
    assert strict.word != "faster" and "99.9999 % CI" in strict.line
