"""Verdicts: a plain-word judgement of each candidate arm against the noise floor.

A verdict answers three questions about a candidate, per seed and over seeds:
1. is its distance to the reference within the noise floor (the exact backend with K/V order
   reversed, measured the same way), and by how much;
2. are its global statistics inside the spread of the exact runs (reference and noise floor),
   with the tolerance stated;
3. were all attention calls served by the requested op (no fallback, every rank).
"""

from __future__ import annotations

import math
import statistics

from pydantic import Field

from harness.compare.metrics import ACCURACY_METRICS, AccuracyMetric
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary, stat_fields
from harness.number_format import fmt_db, fmt_num
from harness.records import Record

DEFAULT_STATS_REL_TOL = 0.01


class SeedValue(Record):
    seed: int | None = None
    value: float | None = None
    floor: float | None = None


class MetricCheck(Record):
    metric: str
    label: str
    unit: str = ""
    value: float | None = None  # the candidate's value (mean over seeds)
    floor_lo: float | None = None  # the noise floor (lowest over seeds)
    floor_hi: float | None = None  # highest over seeds (equal to floor_lo with one seed)
    per_seed: list[SeedValue] = Field(default_factory=list)
    seeds_below: int = 0
    ok: bool | None = None  # at or above the noise floor in every seed
    text: str = ""


class StatCheck(Record):
    seed: int | None = None
    stat: str
    value: float
    center: float  # mean of the exact runs
    spread: float  # max - min of the exact runs
    tol: float  # max(spread, rel_tol * |center|)
    exact_runs: int
    ok: bool


class Verdict(Record):
    arm: str
    role: str = "candidate"
    keys: list[str] = Field(default_factory=list)  # the runs judged (one per seed)
    seeds: list[int] = Field(default_factory=list)
    measured: int = 0  # runs with accuracy metrics
    within_noise_floor: bool | None = None
    distance: list[MetricCheck] = Field(default_factory=list)
    stats_inside: bool | None = None
    stats: list[StatCheck] = Field(default_factory=list)
    stats_tolerance: str = ""
    attention_ok: bool | None = None
    attention: str = ""
    sentences: list[str] = Field(default_factory=list)
    summary: str = ""


def stats_tolerance_rule(rel_tol: float) -> str:
    """When a statistic is inside the exact runs' spread (the check ``_stat_checks`` makes)."""
    return f"|x - mean(exact)| <= max(max(exact) - min(exact), {rel_tol:g} * |mean(exact)|)"


def stats_tolerance_text(rel_tol: float) -> str:
    return f"{stats_tolerance_rule(rel_tol)}, exact = the reference and noise-floor runs of the same seed"


def _span(lo: float, hi: float, unit: str, digits: int) -> str:
    f = (lambda x: fmt_db(x)) if unit == "dB" else (lambda x: fmt_num(x, digits))
    return f(lo) if lo == hi else f"{f(lo)}..{f(hi)}"


def _delta_text(delta: float, unit: str, digits: int) -> str:
    if math.isinf(delta):
        return "inf"
    return f"{abs(delta):.2f} dB" if unit == "dB" else f"{abs(delta):.{digits}f}"


def _metric_check(
    m: AccuracyMetric, cands: list[Comparison], floors: dict[int | None, Comparison]
) -> MetricCheck:
    chk = MetricCheck(metric=m.key, label=m.label, unit=m.unit)
    values, deltas = [], []
    for c in cands:
        val = m.get(c)
        f = floors.get(c.b.seed)
        fl = m.get(f) if f is not None else None
        chk.per_seed.append(SeedValue(seed=c.b.seed, value=val, floor=fl))
        if val is None:
            continue
        values.append(val)
        if fl is not None:
            deltas.append(val - fl if not (math.isinf(val) and math.isinf(fl)) else 0.0)
    if not values:
        chk.text = f"{m.label}: not measured"
        return chk
    chk.value = math.inf if any(math.isinf(x) for x in values) else statistics.fmean(values)
    floor_vals = [s.floor for s in chk.per_seed if s.floor is not None]
    n = len(chk.per_seed)
    many = n > 1
    val_txt = m.fmt(chk.value) + (f" (mean of {len(values)} seeds)" if many else "")
    if not floor_vals:
        chk.text = f"{m.label} {val_txt}: no noise floor to compare with"
        return chk
    chk.floor_lo, chk.floor_hi = min(floor_vals), max(floor_vals)
    chk.seeds_below = sum(1 for d in deltas if d < 0)
    chk.ok = chk.seeds_below == 0  # judged on the seeds that have a floor
    floor_txt = _span(chk.floor_lo, chk.floor_hi, m.unit, m.digits)
    head = f"{m.label} {val_txt} vs noise floor {floor_txt}"
    if math.isinf(chk.floor_lo) and chk.floor_lo > 0 and not math.isinf(chk.value):
        chk.text = f"{head}: the noise floor run is identical to the reference, the candidate is not"
        return chk
    if not many:
        d = deltas[0]
        if d == 0:
            chk.text = f"{head}: exactly at the floor"
        elif math.isinf(d) and d > 0:
            chk.text = f"{head}: identical to the reference, above the floor"
        else:
            where = "above (closer to the reference than the floor)" if d > 0 else "below the floor"
            chk.text = f"{head}: {_delta_text(d, m.unit, m.digits)} {where}"
        return chk
    below = [d for d in deltas if d < 0]
    if below:
        lo, hi = min(abs(d) for d in below), max(abs(d) for d in below)
        by = (
            _delta_text(lo, m.unit, m.digits)
            if lo == hi
            else (f"{_delta_text(lo, m.unit, m.digits)}..{_delta_text(hi, m.unit, m.digits)}")
        )
        chk.text = f"{head}: below the floor in {len(below)} of {len(deltas)} seeds (by {by})"
    else:
        chk.text = f"{head}: at or above the floor in all {len(deltas)} seeds"
    return chk


def _stat_checks(
    cands: list[Comparison], floors: dict[int | None, Comparison], rel_tol: float
) -> list[StatCheck]:
    out: list[StatCheck] = []
    for c in cands:
        mine = stat_fields(c.b.stats)
        exact = [stat_fields(c.a.stats)]
        f = floors.get(c.b.seed)
        if f is not None and f.b.stats is not None:
            exact.append(stat_fields(f.b.stats))
        if c.b.stats is None or c.a.stats is None:
            continue
        for name, x in mine.items():
            ref_vals = [e[name] for e in exact if e[name] is not None]
            if x is None or not ref_vals:
                continue
            center = statistics.fmean(ref_vals)
            spread = max(ref_vals) - min(ref_vals)
            tol = max(spread, rel_tol * abs(center))
            out.append(
                StatCheck(
                    seed=c.b.seed,
                    stat=name,
                    value=x,
                    center=center,
                    spread=spread,
                    tol=tol,
                    exact_runs=len(ref_vals),
                    ok=abs(x - center) <= tol,
                )
            )
    return out


def attention_verdict(runs: list[RunSummary]) -> tuple[bool | None, str]:
    """(all calls served by the requested op, a sentence saying so); None when it cannot be told."""
    judged = [r for r in runs if r.ok]
    if not judged:
        return None, "not judged (no run finished ok)"
    problems: list[str] = []
    unknown = []
    for r in judged:
        if r.valid is None:
            unknown.append(r.key)
        elif not r.valid:
            problems.append(f"{r.key}: " + ("; ".join(r.invalid_reasons) or "marked invalid"))
    if problems:
        return False, "NOT all attention calls were served by the requested op: " + " | ".join(problems)
    if unknown:
        return None, f"attention calls were not recorded for {', '.join(unknown)}"
    calls = sum(r.attn.calls_requested for r in judged if r.attn)
    ranks = max((len(r.attn.ranks) for r in judged if r.attn), default=0)
    op = judged[0].attn.requested if judged[0].attn else judged[0].attn_type
    return True, f"all {calls} attention call(s) on {ranks} rank(s) were served by {op}, with no fallback"


def judge(
    arm: str,
    cands: list[Comparison],
    floors: dict[int | None, Comparison],
    *,
    runs: list[RunSummary] | None = None,
    rel_tol: float = DEFAULT_STATS_REL_TOL,
) -> Verdict:
    """Verdict for one arm: ``cands`` are its runs against the reference (one per seed),
    ``floors`` the noise-floor comparison of each seed (may be empty)."""
    runs = runs if runs is not None else [c.b for c in cands]
    v = Verdict(
        arm=arm,
        role=runs[0].role if runs else "candidate",
        keys=[r.key for r in runs],
        seeds=sorted({r.seed for r in runs if r.seed is not None}),
        stats_tolerance=stats_tolerance_text(rel_tol),
    )
    measured = [c for c in cands if c.measured]
    v.measured = len(measured)
    not_ok = [r for r in runs if not r.ok]
    for r in not_ok:
        v.sentences.append(
            f"{r.key} was not measured: status {r.status}" + (f" ({r.reason})" if r.reason else "")
        )
    for c in cands:
        if c.b.ok and not c.measured:
            v.sentences.append(f"{c.b.key}: " + "; ".join(c.notes or ["not measured"]))

    if measured:
        v.distance = [_metric_check(m, measured, floors) for m in ACCURACY_METRICS]
        judged = [d for d in v.distance if d.ok is not None]
        if judged:
            v.within_noise_floor = all(d.ok for d in judged)
        for d in v.distance:
            if d.value is not None:
                v.sentences.append(d.text)
        v.stats = _stat_checks(measured, floors, rel_tol)
        if v.stats:
            v.stats_inside = all(s.ok for s in v.stats)
            outside = [s for s in v.stats if not s.ok]
            if outside:
                bits = [
                    f"{s.stat}{f' (seed {s.seed})' if len(v.seeds) > 1 else ''} {s.value:.4g} vs exact "
                    f"{s.center:.4g} +- {s.tol:.3g}"
                    for s in outside
                ]
                v.sentences.append(
                    f"global statistics: {len(outside)} of {len(v.stats)} outside the spread of the exact runs: "
                    + "; ".join(bits)
                )
            else:
                v.sentences.append(
                    f"global statistics: all {len(v.stats)} inside the spread of the exact runs"
                )
            v.sentences.append(f"tolerance: {v.stats_tolerance}")
    v.attention_ok, v.attention = attention_verdict(runs)
    v.sentences.append(f"attention: {v.attention}")
    v.summary = _summary(v, not_ok)
    return v


def _summary(v: Verdict, not_ok: list[RunSummary]) -> str:
    parts = []
    if v.measured == 0:
        parts.append(
            "not measured"
            + (f" ({not_ok[0].status}: {not_ok[0].reason})" if not_ok and not_ok[0].reason else "")
        )
    elif v.within_noise_floor is None:
        parts.append("distance measured, no noise floor to judge it against")
    elif v.within_noise_floor:
        parts.append("within the noise floor")
    else:
        worst = [d for d in v.distance if d.ok is False]
        parts.append("outside the noise floor (" + ", ".join(d.label for d in worst) + " below it)")
    if v.stats_inside is True:
        parts.append("global statistics inside the exact runs' spread")
    elif v.stats_inside is False:
        parts.append("global statistics OUTSIDE the exact runs' spread")
    if v.attention_ok is True:
        parts.append("attention valid")
    elif v.attention_ok is False:
        parts.append("attention INVALID")
    else:
        parts.append("attention not verified")
    return "; ".join(parts)
