"""The one rule every judgement follows: an interval against a bound gives a word, words give one
word, and the statistics behind the intervals (pooled spread, Student's t, Holm, Welch), so an edge
(a ratio exactly at the bound) is decided once."""

from __future__ import annotations

import functools
import math
import statistics
import warnings
from collections.abc import Iterable, Sequence

# The seven words, spelled here only (results.json stores them): other modules use these constants.
IDENTICAL = "identical"  # output bitwise the reference's on every seed: no error to weigh
WITHIN = "within"  # every interval on the good side of its bound
OUTSIDE = "outside"  # some interval wholly past its bound
INCONCLUSIVE = "inconclusive"  # an interval across its bound: nothing decided
INCOMPLETE = "incomplete"  # a value the floor (or the exact runs) has is missing
INVALID = "invalid"  # attention calls not served by the requested op: the numbers measure another kernel
NOT_RUN = "not run"  # no run ended ok
# Every word a verdict can carry, in the order a legend lists them.
WORDS = (IDENTICAL, WITHIN, OUTSIDE, INCONCLUSIVE, INCOMPLETE, INVALID, NOT_RUN)
# How words combine: the first of these present wins; within only when every part is within.
SEVERITY = (OUTSIDE, INCOMPLETE, INCONCLUSIVE, WITHIN)


def word(lo: float, hi: float, bound: float, *, higher_is_worse: bool = True) -> str:
    """The word an interval [lo, hi] supports against ``bound``: within when wholly on the good side
    (at the bound counts: "at most 2x"), outside when wholly past it, else inconclusive (a NaN too).
    ``higher_is_worse`` False: a similarity with a lower bound (a cosine of at least 0.99)."""
    if math.isnan(lo) or math.isnan(hi) or math.isnan(bound):
        return INCONCLUSIVE
    if not higher_is_worse:
        lo, hi, bound = -hi, -lo, -bound
    return WITHIN if hi <= bound else OUTSIDE if lo > bound else INCONCLUSIVE


def combine(words: Iterable[str], *, empty: str = INCOMPLETE) -> str:
    """One word over parts: the first of ``SEVERITY`` any part has; ``empty`` when none (other words,
    e.g. "shown", are not parts)."""
    present = {w for w in words if w in SEVERITY}
    return next((w for w in SEVERITY if w in present), empty)


def severity(w: str) -> int:
    """How bad a word is (within 0 up to outside); a word that is no part ranks as undecided."""
    return len(SEVERITY) - 1 - SEVERITY.index(w if w in SEVERITY else INCONCLUSIVE)


def known(w: str) -> str:
    """``w`` where it is one of ``WORDS``, else undecided (an unknown word decides nothing)."""
    return w if w in WORDS else INCONCLUSIVE


# What each word means, as the page's legend says it.
MEANINGS = {
    IDENTICAL: "bitwise equal to the reference's output on every seed; an approximate kernel that reads so "
    "most likely never ran",
    WITHIN: "every interval under the tolerance",
    OUTSIDE: "some reading over the tolerance (end to end or in situ)",
    INCONCLUSIVE: "an interval across the tolerance",
    INCOMPLETE: "a value the floor has is missing",
    INVALID: "attention calls not served by the requested op",
    NOT_RUN: "no run ended ok",
}

# The rule as a reader is told it, each sentence written once here (scenario help, results.json, report).
TOLERANCE_HELP = (
    f"A candidate is {WITHIN} the floor when the interval of its error-energy ratio to the floor (MSE, 1 - SSIM, "
    f"audio error energy or spectral error; per seed, then combined) lies under this; {OUTSIDE} when it lies "
    f"over it; else {INCONCLUSIVE} (2 = 3.01 dB of PSNR)."
)
DETECTABLE_HELP = (
    f"A statistic reads {WITHIN} only when this design could detect a change of this fraction of its mean "
    f"(else {INCONCLUSIVE}, with the change it could detect)."
)


def ratio_rule_text(tolerance: float) -> str:
    """The words of a ratio against the tolerance, as results.json's verdict convention says them."""
    return (
        f"{WITHIN} when the interval lies under {tolerance:g}x (every seed too), {OUTSIDE} when over, else "
        f"{INCONCLUSIVE} (one floor run per seed: a spread the scenario states, else the seeds' spread alone)"
    )


def verdict_rule_text(tolerance: float) -> str:
    """The words of a verdict, as the report's verdict section says them."""
    return (
        f"Tolerance {tolerance:g}x ({10 * math.log10(tolerance):.2f} dB of PSNR): {WITHIN} when the interval "
        f"lies under it, {OUTSIDE} when over it, else {INCONCLUSIVE} (with the seeds that would decide it). "
        f"A value the floor has and the candidate lacks makes the verdict {INCOMPLETE}; a value that is not "
        f"finite fails. {IDENTICAL.capitalize()}: the output is bitwise equal to the reference's on every seed "
        "(no error to weigh, no ratio); an approximate kernel that reads so most likely never ran. The in-situ "
        f"reading, where there is one, is a second reading beside the end-to-end one in every regime: the "
        f"verdict is {OUTSIDE} when it is."
    )


def pooled_sd(groups: Iterable[Sequence[float]]) -> tuple[float | None, float]:
    """(s, df): the within-group sd pooled over groups; (None, 0) when no group has two values."""
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

    return float(2 * (special.ndtr(-abs(t)) if math.isinf(df) else special.stdtr(df, -abs(t))))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None), in the order given."""
    idx = sorted((i for i, p in enumerate(p_values) if p is not None), key=lambda i: p_values[i])
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (len(idx) - rank) * float(p_values[i])))
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
