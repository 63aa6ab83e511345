"""Global statistics judged against run-to-run variability (docs/verdicts.md): a typical value against its
seed's exact runs as one more run, z = (x - m_s) / (s_p sqrt(1 + 1/n_s)), Holm over every statistic and
seed; outside needs a change beyond ``stats_min_effect`` too, within a design that could detect
``stats_detectable``; counts by ``count_tolerance``; extremes shown; non-finite fails; missing incomplete."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import Field

from harness.compare.summary import SHOWN_STATS
from harness.number_format import fmt_stat, percent_text
from harness.records import Record
from harness.rule import (
    INCOMPLETE,
    INCONCLUSIVE,
    OUTSIDE,
    WITHIN,
    combine,
    holm,
    pooled_sd,
    t_quantile,
    t_two_sided_p,
)
from harness.run_keys import Sample
from harness.scenario.verdict import VerdictRules

COUNT_STATS = ("black_frames", "frozen_frames", "nan_like_frames")
TYPICAL_STATS = ("luma_mean", "luma_std", "sharpness", "motion", "audio_rms")
POWER = 0.8


class StatsSample(Record):
    """One run's global statistics (names of ``summary.stat_fields``)."""

    key: str = ""
    seed: Sample | None = None
    frames: int | None = None
    values: dict[str, float | None] = Field(default_factory=dict)


class StatCheck(Record):
    seed: Sample | None = None
    stat: str
    value: float | None = None
    center: float | None = None  # mean of the exact runs of the seed
    lo: float | None = None  # the (Bonferroni) prediction interval shown
    hi: float | None = None
    sd: float | None = None  # pooled within-seed sd of the exact runs
    df: float = 0.0
    exact_runs: int = 0
    p: float | None = None
    p_adjusted: float | None = None
    detectable: float | None = None  # smallest relative change this design detects
    judged: bool = True  # False: an extreme value, shown only
    word: str = ""  # a word of harness.rule.SEVERITY, or "shown" (not judged)
    text: str = ""


class StatsVerdict(Record):
    word: str = ""  # the checks' words combined (harness.rule); "" when nothing to judge
    checks: list[StatCheck] = Field(default_factory=list)
    text: str = ""


def rule_text(rules: VerdictRules) -> str:
    return (
        "x against the exact runs of its seed (reference and noise floor): prediction interval from their "
        "within-seed variance pooled over seeds, Holm over every statistic and seed judged at alpha "
        f"{rules.alpha:g} and a change over {100 * rules.stats_min_effect:g}% of the mean; within only when a "
        f"change of {100 * rules.stats_detectable:g}% of the mean is "
        f"detectable; counts: more than max(exact) + {100 * rules.count_tolerance:g}% of the frames (at least 1; "
        f"NaN-like frames, and any kind no exact run has: any more); judged: {', '.join(TYPICAL_STATS + COUNT_STATS)}; shown only (extremes): "
        + ", ".join(SHOWN_STATS)
    )


def _pooled(exact: Sequence[StatsSample], name: str) -> tuple[float | None, float, dict]:
    """(s_p, df, {seed: (mean, n)}) of a statistic over the exact runs."""
    by_seed: dict[int | None, list[float]] = {}
    for e in exact:
        x = e.values.get(name)
        if x is not None and math.isfinite(x):
            by_seed.setdefault(e.seed, []).append(float(x))
    sd, df = pooled_sd(by_seed.values())
    centers = {s: (statistics.fmean(xs), len(xs)) for s, xs in by_seed.items()}
    return sd, df, centers


def _typical(c: StatsSample, name: str, pooled: tuple, m: int, rules: VerdictRules) -> StatCheck:
    chk = StatCheck(seed=c.seed, stat=name, value=c.values.get(name))
    sd, df, centers = pooled
    chk.df = df
    where = f" (seed {c.seed})" if c.seed is not None else ""
    if c.seed not in centers:
        chk.word, chk.text = INCOMPLETE, f"{name}{where}: no exact run of this seed has it"
        return chk
    center, n = centers[c.seed]
    chk.center, chk.exact_runs, chk.sd = center, n, sd
    if chk.value is None:
        chk.word, chk.text = INCOMPLETE, f"{name}{where}: the candidate lacks it (the exact runs have it)"
        return chk
    if not math.isfinite(chk.value):
        chk.word, chk.text = OUTSIDE, f"{name}{where} is {chk.value} (not finite): fails"
        return chk
    if sd is None:
        chk.word = INCONCLUSIVE
        chk.text = (
            f"{name}{where} {fmt_stat(name, chk.value)}: one exact run per seed gives no run-to-run spread"
        )
        return chk
    scale = max(sd, 1e-9 * max(abs(center), 1.0)) * math.sqrt(1 + 1 / n)  # the values' resolution
    z = (chk.value - center) / scale
    chk.p = t_two_sided_p(z, df)
    q = t_quantile(1 - rules.alpha / (2 * m), df)
    chk.lo, chk.hi = center - q * scale, center + q * scale
    chk.detectable = (q + t_quantile(POWER, df)) * scale / abs(center) if center else None
    return chk


def _count(c: StatsSample, name: str, exact: Sequence[StatsSample], rules: VerdictRules) -> StatCheck:
    chk = StatCheck(seed=c.seed, stat=name, value=c.values.get(name))
    runs = [e.values.get(name) for e in exact if e.seed == c.seed]
    runs = [float(x) for x in runs if x is not None and math.isfinite(x)]
    where = f" (seed {c.seed})" if c.seed is not None else ""
    chk.exact_runs = len(runs)
    if not runs:
        chk.word, chk.text = INCOMPLETE, f"{name}{where}: no exact run of this seed has it"
        return chk
    if chk.value is None:
        chk.word, chk.text = INCOMPLETE, f"{name}{where}: the candidate lacks it (the exact runs have it)"
        return chk
    # A kind of frame no exact run of the seed has is a defect from its first frame: no allowance.
    strict = name == "nan_like_frames" or max(runs) == 0
    allow = 0.0 if strict else max(1.0, math.ceil(rules.count_tolerance * (c.frames or 0)))
    chk.lo, chk.hi, chk.center = max(0.0, min(runs) - allow), max(runs) + allow, statistics.fmean(runs)
    ok = math.isfinite(chk.value) and chk.lo <= chk.value <= chk.hi
    chk.word = WITHIN if ok else OUTSIDE
    band = f"[{fmt_stat(name, chk.lo)}, {fmt_stat(name, chk.hi)}]"
    chk.text = f"{name}{where} {fmt_stat(name, chk.value)} {'inside' if ok else 'outside'} {band}"
    return chk


def judge_stats(
    cands: Sequence[StatsSample], exact: Sequence[StatsSample], rules: VerdictRules
) -> StatsVerdict:
    """Every statistic of every candidate run against the exact runs of its seed (module docstring)."""
    out = StatsVerdict()
    typical: list[StatCheck] = []
    present = [n for n in TYPICAL_STATS if any(e.values.get(n) is not None for e in exact)]
    counted = [n for n in COUNT_STATS if any(e.values.get(n) is not None for e in exact)]
    m = max(1, len(present) * len(cands))
    pooled = {name: _pooled(exact, name) for name in present}
    for c in cands:
        typical += [_typical(c, name, pooled[name], m, rules) for name in present]
        out.checks += [_count(c, name, exact, rules) for name in counted]
        for name in (n for n in SHOWN_STATS if c.values.get(n) is not None):
            shown = StatCheck(seed=c.seed, stat=name, value=c.values[name], judged=False, word="shown")
            shown.text = f"{name} {fmt_stat(name, shown.value)} shown, not judged (an extreme value)"
            out.checks.append(shown)
    tested = [t for t in typical if t.p is not None]
    for t, p in zip(tested, holm([t.p for t in tested]), strict=True):
        t.p_adjusted = p
        where = f" (seed {t.seed})" if t.seed is not None else ""
        band = f"[{fmt_stat(t.stat, t.lo)}, {fmt_stat(t.stat, t.hi)}]"
        could = f"could detect {percent_text(t.detectable)}" if t.detectable is not None else ""
        big = abs(t.value - t.center) > rules.stats_min_effect * abs(t.center)  # type: ignore[operator]
        if p is not None and p < rules.alpha and big:  # a tested check has its value and centre
            t.word = OUTSIDE
        elif t.detectable is not None and t.detectable <= rules.stats_detectable:
            t.word = WITHIN
        else:
            t.word = INCONCLUSIVE
        t.text = (
            f"{t.stat}{where} {fmt_stat(t.stat, t.value)} {'outside' if t.word == OUTSIDE else 'inside'} {band} "
            f"(Holm p={p:.2g}; {could} at this n)"
        )
    out.checks = typical + out.checks
    judged = [c for c in out.checks if c.judged]
    if not judged:
        return out
    out.word = combine((c.word for c in judged), empty=WITHIN)
    out.text = stats_text(out, rules)
    return out


def stats_text(v: StatsVerdict, rules: VerdictRules) -> str:
    judged = [c for c in v.checks if c.judged]
    bad = [c for c in judged if c.word == OUTSIDE]
    if v.word == OUTSIDE:
        more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
        shown = "; ".join(c.text for c in bad[:3]) + more
        return f"statistics OUTSIDE run-to-run variability ({len(bad)} of {len(judged)}): {shown}"
    if v.word == INCOMPLETE:
        return f"statistics {INCOMPLETE}: " + "; ".join(c.text for c in judged if c.word == INCOMPLETE)
    worst = max((c.detectable for c in judged if c.detectable is not None), default=None)
    could = f"could detect a change of {percent_text(worst)} at this n" if worst is not None else "no spread"
    if v.word == INCONCLUSIVE:
        needs = f"within needs {100 * rules.stats_detectable:g}%"
        return f"statistics: no difference detected ({could}; {needs}): {v.word}"
    return f"statistics within run-to-run variability ({len(judged)} judged; {could})"
