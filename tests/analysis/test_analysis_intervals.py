"""harness.analysis.intervals: a ratio of error energies per seed against that seed's floor, combined
over seeds with an interval, and the word it supports."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from harness.analysis.intervals import SeedValues, baseline_reading, ratio_reading


def test_the_interval_is_the_stated_formula():
    seeds = [SeedValues(seed=1, candidate=3.0, floors=[1.0, 1.2, 0.9]),
             SeedValues(seed=2, candidate=2.6, floors=[1.1, 1.0, 1.3])]  # fmt: skip
    r = ratio_reading("video_mse", "video MSE", seeds, bound=2.0, alpha=0.05, prior_sd=0.04)
    logs = [np.log(s.floors) for s in seeds]
    sigma = math.sqrt(sum(((x - x.mean()) ** 2).sum() for x in logs) / 4)
    assert r.log_sd == pytest.approx(sigma) and "spread measured" in r.spread
    l1, l2 = (math.log(s.candidate) - math.log(np.mean(s.floors)) for s in seeds)
    se_s = sigma * math.sqrt(1 + 1 / 3)
    q_seed = stats.t.ppf(1 - 0.05 / 4, 4)  # every seed must pass: alpha / seeds
    assert r.per_seed[0].ratio_ci == pytest.approx(
        [math.exp(l1 - q_seed * se_s), math.exp(l1 + q_seed * se_s)]
    )
    a, tau2 = 2 * se_s**2 / 4, max(0.0, np.var([l1, l2], ddof=1) - se_s**2)
    se = math.sqrt(a + tau2 / 2)
    df = 4 if tau2 == 0 else (a + tau2 / 2) ** 2 / (a * a / 4 + (tau2 / 2) ** 2 / 1)
    q = stats.t.ppf(0.975, df)
    assert r.ratio == pytest.approx(math.exp((l1 + l2) / 2))
    assert r.ratio_ci == pytest.approx([math.exp((l1 + l2) / 2 - q * se), math.exp((l1 + l2) / 2 + q * se)])


def test_words_and_what_would_decide():
    tight = [SeedValues(seed=s, candidate=3.0, floors=[1.0, 1.01, 0.99]) for s in (1, 2, 3)]
    assert ratio_reading("m", "m", tight, bound=2.0, alpha=0.05, prior_sd=0.04).word == "outside"
    close = [SeedValues(seed=s, candidate=1.05, floors=[1.0, 1.01, 0.99]) for s in (1, 2, 3)]
    assert ratio_reading("m", "m", close, bound=2.0, alpha=0.05, prior_sd=0.04).word == "within"
    wide = [SeedValues(seed=s, candidate=2.6, floors=[0.7, 1.0, 1.4]) for s in (1, 2)]
    r = ratio_reading("m", "m", wide, bound=2.0, alpha=0.05, prior_sd=0.04)
    assert r.word == "inconclusive" and r.seeds_to_decide and r.seeds_to_decide > 2
    assert f"about {r.seeds_to_decide} seeds would decide it" in r.text
    # every seed must pass: one seed over the bound is never "within", one clearly over it is outside
    mixed = close[:2] + [SeedValues(seed=3, candidate=30.0, floors=[1.0, 1.01, 0.99])]
    m = ratio_reading("m", "m", mixed, bound=2.0, alpha=0.05, prior_sd=0.04)
    assert m.word == "outside" and [s.word for s in m.per_seed] == ["within", "within", "outside"]


def test_one_floor_run_per_seed_uses_the_stated_assumption():
    seeds = [SeedValues(seed=1, candidate=2.32, floors=[1.0])]
    r = ratio_reading("video_mse", "video MSE", seeds, bound=2.0, alpha=0.05, prior_sd=0.04)
    assert r.df == math.inf and "spread of a run stated by the scenario: sd 0.04" in r.text
    z = stats.norm.ppf(0.975)
    assert r.ratio_ci == pytest.approx(
        [2.32 * math.exp(-z * 0.04 * math.sqrt(2)), 2.32 * math.exp(z * 0.04 * math.sqrt(2))]
    )
    assert "agree exactly" not in r.text  # one run a seed measures no spread (not a spread of 0)


def test_missing_zero_and_non_finite():
    assert ratio_reading("m", "m", [SeedValues(seed=1, candidate=None, floors=[1.0, 1.1])], bound=2, alpha=0.05,
                         prior_sd=0.1).word == "incomplete"  # fmt: skip
    inf = ratio_reading(
        "m", "m", [SeedValues(seed=1, candidate=math.inf, floors=[1.0])], bound=2, alpha=0.05, prior_sd=0.1
    )
    assert inf.word == "outside" and "not finite" in inf.text
    nan_floor = ratio_reading("m", "m", [SeedValues(seed=1, candidate=1.0, floors=[math.nan], floor_keys=["f"])],
                              bound=2, alpha=0.05, prior_sd=0.1)  # fmt: skip
    assert nan_floor.word == "incomplete" and "f is not finite" in nan_floor.text
    # a floor of energy 0 perturbed nothing: no yardstick, whatever the candidate (never "inf the floor's")
    for cand in (0.0, 1e-3):
        no_floor = ratio_reading(
            "m",
            "m",
            [SeedValues(seed=1, candidate=cand, floors=[0.0, 0.0])],
            bound=2,
            alpha=0.05,
            prior_sd=0.1,
        )
        assert no_floor.word == "incomplete" and "identical to the reference): no floor" in no_floor.text
    # a candidate of energy 0 is its own case: ratio 0 on its seed, the other seeds combined without it
    zero = SeedValues(seed=1, candidate=0.0, floors=[1.0, 1.1, 0.9])
    rest = [SeedValues(seed=s, candidate=1.0, floors=[1.0, 1.1, 0.9]) for s in (2, 3)]
    r = ratio_reading("m", "m", [zero, *rest], bound=2, alpha=0.05, prior_sd=None)
    assert r.per_seed[0].ratio == 0.0 and r.per_seed[0].word == "within"
    assert r.ratio == pytest.approx(1.0 / np.mean([1.0, 1.1, 0.9])) and r.word == "within"
    only_zero = ratio_reading("m", "m", [zero], bound=2, alpha=0.05, prior_sd=None)
    assert only_zero.ratio == 0.0 and only_zero.word == "within"


def test_baseline_non_inferiority():
    pairs = [(s, 0.95, 1.0) for s in (1, 2, 3)]
    r = baseline_reading("video_mse", "video MSE", pairs, baseline="sage_attn2", margin=1.25, alpha=0.05,
                         sigma=0.03, df=6)  # fmt: skip
    assert r.word == "not worse" and r.ratio == pytest.approx(0.95) and "0.95x sage_attn2's" in r.text
    bad = baseline_reading("video_mse", "video MSE", [(1, 2.0, 1.0)], baseline="b", margin=1.25, alpha=0.05,
                           sigma=0.03, df=math.inf)  # fmt: skip
    assert bad.word == "worse"
