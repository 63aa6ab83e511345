"""When a timing difference is a finding: the speed-up (reference / arm time, the runs' geometric means; a run
is one sample) with its interval; Holm adjusts only the p. Designs and words: docs/verdicts.md's "Speed"."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from harness.number_format import ci_text, fmt_s, level_text, percent_text, ratio_text
from harness.records import Record
from harness.rule import holm, pooled_sd, t_quantile, t_two_sided_p
from harness.safe_math import safe_exp, scaled_mean_sd
from harness.scenario.verdict import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT  # the scenario's verdict block

MIN_SAMPLES = 2  # runs a side (or pairs) for an interval
POWER = 0.8  # of the detectable change a "no difference detected" states
ZERO_SPREAD = 1e-12  # se of a mean log ratio under this: round-off of equal timings, not spread
TEST_NAME = "t interval on log times"

Word = Literal[
    "faster",
    "slower",
    "no meaningful difference",
    "no difference detected",
    "not significant after Holm",
    "difference detected, size unclear",
    "zero spread",
    "too few runs",
]
ZERO_SPREAD_TEXT = {  # what had no spread, by design
    "paired by seed and repeat": "the ratio identical on every pair",
    "blocked by seed": "timings identical within every seed",
}
Design = Literal["paired by seed and repeat", "blocked by seed", "unpaired", "one run a side", ""]


class SpeedTest(Record):
    """An arm's timing against the reference's; ``speedup`` = reference time / arm time."""

    what: str = ""
    unit: str = "s"
    samples: str = "runs"  # what one sample is (runs: processes)
    ref: list[float] = Field(default_factory=list)  # the reference's samples
    arm: list[float] = Field(default_factory=list)
    n_ref: int = 0
    n_arm: int = 0
    mean_ref: float | None = None  # arithmetic means and sample sds, as tables print them
    mean_arm: float | None = None
    sd_ref: float | None = None
    sd_arm: float | None = None
    design: Design = ""
    n_pairs: int = 0  # pairs or seeds the interval rests on (paired / blocked)
    df: float | None = None
    speedup: float | None = None  # reference time / arm time (geometric means)
    speedup_ci: list[float] | None = None  # [lo, hi] at 1 - alpha
    p: float | None = None  # two-sided, of equal times
    p_adjusted: float | None = None  # Holm over the tests of one family (= p until ``holm``)
    family: str = ""  # the family Holm adjusted over ("candidates", "noise floors", ...)
    family_size: int = 0  # tests in that family (0: not adjusted)
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT
    detectable: float | None = None  # the relative change this design detects (alpha, 80 % power)
    word: Word = "too few runs"
    line: str = ""
    test: str = TEST_NAME
    offsets: list[int] = Field(default_factory=list)  # a pair's arm place in its round less the reference's
    machine: str = ""  # how busy the machine was during these runs ('': not busy, or not recorded)

    @property
    def significant(self) -> bool:
        return self.word in ("faster", "slower")

    @property
    def measured(self) -> bool:
        return self.n_ref > 0 and self.n_arm > 0

    @property
    def words(self) -> str:
        """The finding and its evidence, without the two sides' means (``line`` has them); then what the
        run order and the machine's load say of it."""
        return "; ".join(x for x in (self._finding(), order_note(self), self.machine) if x)

    def _finding(self) -> str:
        n = f"n={self.n_ref}/{self.n_arm} {self.samples}"
        if not self.measured:
            return f"no timing ({n})"
        head = f"speed-up {fmt_speedup_value(self.speedup)}"
        if self.word == "zero spread":
            what = ZERO_SPREAD_TEXT.get(self.design, "timings identical on every run")
            return f"{head}: zero spread: {what} ({n}), no interval, no claim"
        if self.speedup_ci is None:
            if self.design == "one run a side":
                return (
                    f"{head}: one run a side: no speed word (runs are the samples, not the steps of one run)"
                )
            return f"{head}: too few runs for an interval ({n}; {MIN_SAMPLES} a side needed)"
        lo, hi = self.speedup_ci
        ci = ci_text(lo, hi, self.alpha, fmt=lambda x: fmt_speedup_value(x).removesuffix("x"))
        design = f", {self.design}" if self.design and self.design != "unpaired" else ""
        p = f"p={fmt_p(self.p)}"
        over = f" over {self.family_size} tests" if self.family_size > 1 else ""
        if self.p_adjusted is not None and self.p_adjusted != self.p:
            p += f", Holm {fmt_p(self.p_adjusted)}{over}"
        effect = f"minimum effect {100 * self.min_effect:g}%"
        lead = f"{head} ({ci}; {n}{design}): {self.word}"
        if self.word == "not significant after Holm":
            return f"{lead}{over} ({p}; the {level_text(self.alpha)} CI excludes 1 before the correction, {effect})"
        if self.word == "difference detected, size unclear":
            return f"{lead} (the interval reaches inside the {effect}; {p})"
        if self.word == "no difference detected" and self.detectable is not None:
            return (
                f"{lead} ({p}, {effect}; could detect a change of {percent_text(self.detectable)} at this n)"
            )
        return f"{lead} ({p}, {effect})"

    def finish(self, p_adjusted: float | None = None) -> SpeedTest:
        # the one given, else the one set before, else the test's own p
        self.p_adjusted = next((p for p in (p_adjusted, self.p_adjusted, self.p) if p is not None), None)
        if self.word != "zero spread":  # set by ``_interval``: no interval, no p, no word to find
            self.word = speed_word(self)
        head = f"{self.what}: " if self.what else ""
        ref = mean_sd_text(self.mean_ref, self.sd_ref, self.n_ref, self.unit)
        arm = mean_sd_text(self.mean_arm, self.sd_arm, self.n_arm, self.unit)
        self.line = f"{head}{ref} -> {arm}: {self.words}"
        return self


def speed_word(t: SpeedTest) -> Word:
    """The word of the module docstring; read against the interval itself (never against p alone),
    so that round-off between the interval and its p cannot make them disagree."""
    if t.speedup_ci is None or t.p_adjusted is None:
        return "too few runs"
    lo, hi = t.speedup_ci
    up, down = 1.0 + t.min_effect, 1.0 / (1.0 + t.min_effect)
    rejects = t.p_adjusted < t.alpha
    if rejects and lo > up:
        return "faster"
    if rejects and hi < down:
        return "slower"
    if down < lo and hi < up:
        return "no meaningful difference"
    if lo <= 1.0 <= hi:
        return "no difference detected"
    return "difference detected, size unclear" if rejects else "not significant after Holm"


# the words that claim a difference (after Holm)
DIFFERENCE_WORDS = ("faster", "slower", "difference detected, size unclear")


def order_note(t: SpeedTest) -> str:
    """What the places of a paired test's runs in their rounds say ('' where nothing): with both orders
    seen, the log ratio's regression on the arm's place less the reference's names a drift along the
    round and whether the speed-up at equal places still differs; with one order, that it cannot."""
    n = len(t.offsets)
    if t.design != "paired by seed and repeat" or n != len(t.ref) or n < 2:
        return ""
    if len(set(t.offsets)) == 1:
        first = "the reference" if t.offsets[0] > 0 else "the arm"
        return f"run order unchecked: {first} ran first in every pair" if t.word in DIFFERENCE_WORDS else ""
    if n < 3:  # two pairs in two orders: a line through both, no spread left to test it
        return ""
    d = [math.log(r) - math.log(a) for r, a in zip(t.ref, t.arm, strict=True)]
    x_bar, d_bar = statistics.fmean(t.offsets), statistics.fmean(d)
    sxx = sum((x - x_bar) ** 2 for x in t.offsets)
    beta = sum((x - x_bar) * (y - d_bar) for x, y in zip(t.offsets, d, strict=True)) / sxx
    mu = d_bar - beta * x_bar  # the log speed-up at equal places
    s2 = sum((y - mu - beta * x) ** 2 for x, y in zip(t.offsets, d, strict=True)) / (n - 2)
    se_beta, se_mu = math.sqrt(s2 / sxx), math.sqrt(s2 * (1 / n + x_bar**2 / sxx))
    p = (1.0 if beta == 0 else 0.0) if se_beta < ZERO_SPREAD else t_two_sided_p(beta / se_beta, n - 2)
    if p >= t.alpha:
        return ""
    q = t_quantile(1 - t.alpha / 2, n - 2)
    lo, hi = safe_exp(mu - q * se_mu), safe_exp(mu + q * se_mu)
    later = safe_exp(-beta) - 1  # a run one place later in its round, relative to one place earlier
    head = f"run order: a run one place later in its round took {percent_text(abs(later))} "
    head += f"{'longer' if later > 0 else 'less'} (p={fmt_p(p)})"
    if t.word in DIFFERENCE_WORDS and lo <= 1.0 <= hi:
        at_equal = ci_text(lo, hi, t.alpha, fmt=lambda v: fmt_speedup_value(v).removesuffix("x"))
        return f"{head}: the order explains the difference (at equal places {fmt_speedup_value(safe_exp(mu))}, {at_equal})"
    return head


def fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def fmt_speedup_value(x: float | None) -> str:
    """Three significant figures, trailing zeros kept: '2.00x', '0.846x', '12.3x'; never an exponent
    (``ratio_text`` past 0.001 and 1,000)."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if not 1e-3 <= abs(x) < 1e3:
        return ratio_text(x)
    return f"{x:#.3g}".rstrip(".") + "x"


def mean_sd_text(mean: float | None, sd: float | None, n: int, unit: str = "s") -> str:
    """'0.451 ± 0.003 s (n=9)'; one sample: '0.451 s (n=1)'; none: 'n/a'."""
    if mean is None or n == 0:
        return "n/a"
    spread = "" if sd is None else f" ± {fmt_s(sd)}"
    return f"{fmt_s(mean)}{spread}{f' {unit}' if unit else ''} (n={n})"


def holm_tests(tests: Sequence[SpeedTest], family: str = "") -> None:
    """Adjust the p-values of one family of speed tests together (Holm) and set their words; a test
    without a p (no interval) is no member of the family."""
    members = [t for t in tests if t.p is not None]
    for t, p in zip(members, holm([t.p for t in members]), strict=True):
        t.family, t.family_size = family, len(members)
        t.finish(p)


def _clean(xs: Sequence[float | None]) -> list[float]:
    """The usable timings: None, NaN, infinity and non-positive ones left out."""
    return [float(x) for x in xs if x is not None and math.isfinite(x) and x > 0]


def _base(ref: list[float], arm: list[float], design: Design, **how: Any) -> SpeedTest:
    """``how``: what, unit, samples, alpha, min_effect (``SpeedTest``'s defaults where not given)."""
    t = SpeedTest(ref=ref, arm=arm, n_ref=len(ref), n_arm=len(arm), design=design, **how)
    if ref:
        t.mean_ref, t.sd_ref = scaled_mean_sd(ref)
    if arm:
        t.mean_arm, t.sd_arm = scaled_mean_sd(arm)
    if ref and arm:
        t.speedup = safe_exp(statistics.fmean(map(math.log, ref)) - statistics.fmean(map(math.log, arm)))
    return t


def _interval(t: SpeedTest, d: float, se: float, df: float) -> SpeedTest:
    """Set the interval, p and detectable change from a mean log ratio ``d`` (ref over arm) and its se;
    no spread (se under ``ZERO_SPREAD``): the word ``zero spread`` and no interval, p or claim."""
    t.df = df
    if se < ZERO_SPREAD:
        t.word = "zero spread"
        return t.finish()
    q = t_quantile(1 - t.alpha / 2, df)
    t.speedup_ci = [safe_exp(d - q * se), safe_exp(d + q * se)]
    t.p = t_two_sided_p(d / se, df)
    t.detectable = safe_exp((q + t_quantile(POWER, df)) * se) - 1.0
    return t.finish()


def compare_samples(ref: Sequence[float | None], arm: Sequence[float | None], **how: Any) -> SpeedTest:
    """Independent runs of the reference and of the arm: Welch on log times."""
    t = _base(_clean(ref), _clean(arm), "unpaired", **how)
    if t.n_ref < MIN_SAMPLES or t.n_arm < MIN_SAMPLES:
        return t.finish()
    lr, la = [math.log(x) for x in t.ref], [math.log(x) for x in t.arm]
    vr, va = statistics.variance(lr) / len(lr), statistics.variance(la) / len(la)
    d, se = statistics.fmean(lr) - statistics.fmean(la), math.sqrt(vr + va)
    df = (vr + va) ** 2 / (vr**2 / (len(lr) - 1) + va**2 / (len(la) - 1)) if se > 0 else len(lr) + len(la) - 2
    return _interval(t, d, se, df)


def compare_pairs(pairs: Sequence[tuple[float | None, float | None]], **how: Any) -> SpeedTest:
    """(reference, arm) runs paired by the design: a paired t on the log ratios."""
    kept = [(r, a) for r, a in pairs if _clean([r]) and _clean([a])]
    t = _base(_clean([r for r, _ in kept]), _clean([a for _, a in kept]), "paired by seed and repeat", **how)
    t.n_pairs = len(kept)
    if len(kept) < MIN_SAMPLES:
        return t.finish()
    d = [math.log(r) - math.log(a) for r, a in zip(t.ref, t.arm, strict=True)]
    return _interval(t, statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d)), len(d) - 1)


def compare_blocked(
    blocks: Sequence[tuple[Sequence[float | None], Sequence[float | None]]], **how: Any
) -> SpeedTest:
    """Runs grouped by seed, (reference runs, arm runs) per seed: the mean over seeds of the within-seed
    log ratio; its variance from the within-seed variance of log times pooled over seeds and sides."""
    kept = [(r, a) for r, a in ((_clean(r), _clean(a)) for r, a in blocks) if r and a]
    t = _base([x for r, _ in kept for x in r], [x for _, a in kept for x in a], "blocked by seed", **how)
    t.n_pairs = len(kept)
    sd, df = pooled_sd([math.log(x) for x in side] for r, a in kept for side in (r, a))
    if sd is None or df < 1:
        return t.finish()
    d = statistics.fmean(
        statistics.fmean(map(math.log, r)) - statistics.fmean(map(math.log, a)) for r, a in kept
    )
    se = sd * math.sqrt(sum(1 / len(r) + 1 / len(a) for r, a in kept)) / len(kept)
    t.speedup = safe_exp(d)
    return _interval(t, d, se, df)


def one_run_each(ref: float | None, arm: float | None, *, what: str = "", unit: str = "s") -> SpeedTest:
    """One run a side (``harness compare RUN_A RUN_B``): the ratio, never a speed word."""
    return _base(_clean([ref]), _clean([arm]), "one run a side", what=what, unit=unit, samples="run").finish()
