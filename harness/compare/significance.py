"""When a timing difference is a finding: Welch's t-test on kept samples, pyperf's rule.

``compare_samples(a, b)`` takes the samples of the reference (A) and of the candidate (B),
e.g. the s/step of every run of an arm over repeats and seeds, and returns a ``SpeedTest``:
mean ± sd with n on each side, the time ratio B/A, Welch's p-value and the words a report
prints. A ratio word ("1.19x slower") appears only when the test is significant at ``alpha``;
otherwise the words are "no significant difference (n=..)", or "too few samples" when a side
has fewer than ``min_n`` samples. Pure functions, no I/O: reports, history pages and
pull-request tables all call this one place.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from typing import Literal

from harness.number_format import fmt_s
from harness.records import Record
from harness.scenario.verdict import DEFAULT_ALPHA  # one level, held by the scenario's verdict block

MIN_SAMPLES = 2  # per side: Welch's test needs a variance on each side
TEST_NAME = "Welch's two-sided t-test"

Outcome = Literal["faster", "slower", "no_difference", "too_few", "not_measured"]


class SpeedTest(Record):
    """B against A (the reference) on one timing; times, so a ratio below 1 means B is faster."""

    what: str = ""
    unit: str = "s"
    samples: str = "runs"  # what one sample is: runs (processes), steps of one run, ...
    a: list[float] = []
    b: list[float] = []
    n_a: int = 0
    n_b: int = 0
    mean_a: float | None = None
    mean_b: float | None = None
    sd_a: float | None = None  # sample standard deviation; None below two samples
    sd_b: float | None = None
    ratio: float | None = None  # mean_b / mean_a
    p_value: float | None = None
    alpha: float = DEFAULT_ALPHA
    min_n: int = MIN_SAMPLES
    test: str = TEST_NAME
    outcome: Outcome = "not_measured"

    @property
    def significant(self) -> bool:
        return self.outcome in ("faster", "slower")

    @property
    def words(self) -> str:
        """What the comparison says, with its evidence on the same line."""
        n = f"n={self.n_a}/{self.n_b}"
        if self.outcome == "not_measured":
            return "not measured"
        if self.outcome == "too_few":
            return f"too few samples for a test ({n} {self.samples}; {self.min_n} a side needed)"
        p = fmt_p(self.p_value)
        if self.outcome == "no_difference":
            return f"no significant difference ({n} {self.samples}, p={p}, alpha {self.alpha:g})"
        assert self.ratio is not None
        factor = 1 / self.ratio if self.outcome == "faster" else self.ratio
        return f"{factor:.2f}x {self.outcome} ({n} {self.samples}, p={p}, alpha {self.alpha:g})"

    def side(self, which: str) -> str:
        """'0.451 ± 0.003 s (n=9)' for side 'a' or 'b'."""
        mean, sd, n = (
            (self.mean_a, self.sd_a, self.n_a) if which == "a" else (self.mean_b, self.sd_b, self.n_b)
        )
        return mean_sd_text(mean, sd, n, self.unit)

    def line(self) -> str:
        """pyperf's one-liner: 'DiT s/step: 0.451 ± 0.003 s (n=9) -> 0.536 ± 0.002 s (n=9): 1.19x slower (...)'."""
        head = f"{self.what}: " if self.what else ""
        return f"{head}{self.side('a')} -> {self.side('b')}: {self.words}"


def fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    if p == 0.0:
        return "0"
    return f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def mean_sd_text(mean: float | None, sd: float | None, n: int, unit: str = "s") -> str:
    """'0.451 ± 0.003 s (n=9)'; one sample: '0.451 s (n=1)'; none: 'n/a'."""
    if mean is None or n == 0:
        return "n/a"
    u = f" {unit}" if unit else ""
    if sd is None:
        return f"{fmt_s(mean)}{u} (n={n})"
    return f"{fmt_s(mean)} ± {fmt_s(sd)}{u} (n={n})"


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test (scipy); both sides need two samples or more.

    Zero variance on both sides (identical samples) is decided without the t distribution:
    equal means give 1, different means give 0 (a difference that never varies).
    """
    va, vb = statistics.variance(a), statistics.variance(b)
    if va == 0.0 and vb == 0.0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    from scipy import stats

    with warnings.catch_warnings():  # nearly equal samples: scipy warns, the p-value stands
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def compare_samples(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    what: str = "",
    unit: str = "s",
    samples: str = "runs",
    alpha: float = DEFAULT_ALPHA,
    min_n: int = MIN_SAMPLES,
) -> SpeedTest:
    """Reference samples ``a`` against candidate samples ``b`` (None and NaN are left out)."""
    xa = [float(x) for x in a if x is not None and math.isfinite(x)]
    xb = [float(x) for x in b if x is not None and math.isfinite(x)]
    t = SpeedTest(what=what, unit=unit, samples=samples, a=xa, b=xb, n_a=len(xa), n_b=len(xb))
    t.alpha, t.min_n = alpha, max(2, min_n)
    if not xa or not xb:
        return t
    t.mean_a, t.mean_b = statistics.fmean(xa), statistics.fmean(xb)
    t.sd_a = statistics.stdev(xa) if len(xa) > 1 else None
    t.sd_b = statistics.stdev(xb) if len(xb) > 1 else None
    t.ratio = t.mean_b / t.mean_a if t.mean_a > 0 else None
    if len(xa) < t.min_n or len(xb) < t.min_n:
        t.outcome = "too_few"
        return t
    t.p_value = welch_p_value(xa, xb)
    if t.p_value < alpha and t.ratio is not None and t.ratio != 1.0:
        t.outcome = "faster" if t.ratio < 1 else "slower"
    else:
        t.outcome = "no_difference"
    return t
