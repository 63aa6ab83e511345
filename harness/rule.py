"""The one rule every judgement follows: an interval against a bound gives a word, words give one
word, and the statistics those intervals are built from (the pooled within-group spread, Student's
t, Holm's step-down adjustment, Welch's test).

End-to-end verdicts (``analysis.intervals``), in-situ readings (``analysis.insitu``), the structure
checks, the global statistics and the speed tests (``compare.significance``) all read their words
and their statistics here, so an edge (is a ratio exactly at the bound within?) is decided once.
"""

from __future__ import annotations

import functools
import math
import statistics
import warnings
from collections.abc import Iterable, Sequence

# Every word a verdict can carry, in the order a legend lists them.
WORDS = ("identical", "within", "outside", "inconclusive", "incomplete", "invalid", "not run")
# How words combine: the first of these present wins; "within" only when every part is within.
SEVERITY = ("outside", "incomplete", "inconclusive", "within")


def word(lo: float, hi: float, bound: float, *, higher_is_worse: bool = True) -> str:
    """The word an interval [lo, hi] supports against ``bound``: **within** when it lies wholly on
    the good side (at the bound counts as within: "at most 2x"), **outside** when wholly past it,
    else **inconclusive**. A point estimate is the interval [x, x]. ``higher_is_worse`` False: a
    similarity with a lower bound (a cosine of at least 0.99). A NaN bound or end is inconclusive."""
    if math.isnan(lo) or math.isnan(hi) or math.isnan(bound):
        return "inconclusive"
    if not higher_is_worse:
        lo, hi, bound = -hi, -lo, -bound
    if hi <= bound:
        return "within"
    if lo > bound:
        return "outside"
    return "inconclusive"


def combine(words: Iterable[str], *, empty: str = "incomplete") -> str:
    """One word over parts: outside if any part is, else incomplete, else inconclusive, else within;
    ``empty`` when no part has a word. Words outside ``SEVERITY`` (e.g. "shown") are not parts."""
    present = {w for w in words if w in SEVERITY}
    return next((w for w in SEVERITY if w in present), empty)


def pooled_sd(groups: Iterable[Sequence[float]]) -> tuple[float | None, float]:
    """(s, df): the within-group sd pooled over groups (each group's squared deviations from its own
    mean, over the sum of n - 1); (None, 0) when no group has two values."""
    ss = df = 0.0
    for g in groups:
        if len(g) >= 2:
            m = statistics.fmean(g)
            ss += sum((x - m) ** 2 for x in g)
            df += len(g) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0.0)


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float | None) -> float:
    """Student's t quantile (the normal's for infinite df); scipy.special: fast in loops."""
    from scipy import special

    return float(special.ndtri(p)) if df is None or math.isinf(df) else float(special.stdtrit(df, p))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T_df| > |t|)."""
    from scipy import special

    if math.isinf(df):
        return float(2 * special.ndtr(-abs(t)))
    return float(2 * special.stdtr(df, -abs(t)))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None), in the order given."""
    idx = sorted((i for i, p in enumerate(p_values) if p is not None), key=lambda i: p_values[i])
    m = len(idx)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        out[i] = running
    return out


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p of Welch's t-test on raw values; zero variance on both sides: 1 if equal, else 0."""
    va, vb = statistics.variance(a), statistics.variance(b)
    if va == 0.0 and vb == 0.0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    from scipy import stats

    with warnings.catch_warnings():  # nearly equal samples: scipy warns, the p-value stands
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False).pvalue)
