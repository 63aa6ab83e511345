"""Stand-in for issue 13's ``harness.compare.significance``: Welch's t-test on kept samples.

Same call and the same fields that the summary, pr.md and history use (``compare_samples``
-> ``SpeedTest`` with ``outcome``, ``ratio``, ``p_value``, ``words``); the whole module goes
when that one lands, and its importers switch to ``harness.compare.significance``.
A ratio word ("1.19x slower") is printed only when the test is significant at ``alpha``.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence

from harness.records import Record

DEFAULT_ALPHA = 0.05
MIN_SAMPLES = 2  # per side: Welch's test needs a variance on each side


class SpeedTest(Record):
    """B against A (the reference) on one timing: a ratio below 1 means B takes less time."""

    samples: str = "runs"
    n_a: int = 0
    n_b: int = 0
    mean_a: float | None = None
    mean_b: float | None = None
    ratio: float | None = None  # mean_b / mean_a
    p_value: float | None = None
    alpha: float = DEFAULT_ALPHA
    outcome: str = "not_measured"  # faster | slower | no_difference | too_few | not_measured

    @property
    def significant(self) -> bool:
        return self.outcome in ("faster", "slower")

    @property
    def words(self) -> str:
        n = f"n={self.n_a}/{self.n_b} {self.samples}"
        if self.outcome == "not_measured":
            return "not measured"
        if self.outcome == "too_few":
            return f"too few samples for a test ({n}; {MIN_SAMPLES} a side needed)"
        p = fmt_p(self.p_value)
        if self.outcome == "no_difference":
            return f"no significant difference ({n}, p={p}, alpha {self.alpha:g})"
        assert self.ratio is not None
        factor = 1 / self.ratio if self.outcome == "faster" else self.ratio
        return f"{factor:.2f}x {self.outcome} ({n}, p={p}, alpha {self.alpha:g})"


def fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    if p == 0.0:
        return "0"
    return f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p of Welch's t-test; two constant samples: 1 when equal, 0 when not."""
    va, vb = statistics.variance(a), statistics.variance(b)
    if va == 0.0 and vb == 0.0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def compare_samples(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    samples: str = "runs",
    alpha: float = DEFAULT_ALPHA,
) -> SpeedTest:
    """Reference samples ``a`` against ``b`` (None and non-finite values left out)."""
    xa = [float(x) for x in a if x is not None and math.isfinite(x)]
    xb = [float(x) for x in b if x is not None and math.isfinite(x)]
    t = SpeedTest(samples=samples, n_a=len(xa), n_b=len(xb), alpha=alpha)
    if not xa or not xb:
        return t
    t.mean_a, t.mean_b = statistics.fmean(xa), statistics.fmean(xb)
    t.ratio = t.mean_b / t.mean_a if t.mean_a != 0 else None
    if len(xa) < MIN_SAMPLES or len(xb) < MIN_SAMPLES:
        t.outcome = "too_few"
        return t
    t.p_value = welch_p_value(xa, xb)
    if t.p_value < alpha and t.mean_b != t.mean_a:
        t.outcome = "faster" if t.mean_b < t.mean_a else "slower"
    else:
        t.outcome = "no_difference"
    return t
