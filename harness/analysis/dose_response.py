"""The dose-response: how much per-call attention error the pipeline absorbs. The planted arms of a
``dose_response:`` block (one per shape, site and per-call rel L1, the dose) are judged like
candidates; their end-to-end readings become curves (error energy over the floor's against the dose),
each read for its tolerated dose, and an in-situ candidate's per-call error is placed on them.

Curves are log-log between grid doses, their bounds made monotone (a running maximum): a larger dose
is never read as less harmful. The tolerated dose is where the upper bound reaches the tolerance;
where the point and the lower bound reach it say how far above it the limit may lie. A saved final
latent is a reading too: it reads a dose where an 8-bit video rounds the floor's difference away."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.analysis.intervals import RatioReading, SeedValues, ratio_reading
from harness.insitu_records import CallSiteFilter
from harness.metrics.metric import energy_from_db
from harness.number_format import ratio_text
from harness.records import Record
from harness.rule import OUTSIDE
from harness.scenario.dose import PLANTED, SOURCE_COPY

PREDICT_AGREES = 3.0  # a measured ratio within this factor of the prediction's interval agrees
LATENT, LATENT_LABEL = "latent_mse", "final latent MSE"  # a reading of the dose-response alone


class DosePoint(Record):
    dose: float
    arm: str
    ratio: float | None = None
    ratio_ci: list[float] | None = None
    word: str = ""


class DoseCurve(Record):
    """One shape's one reading (video MSE, audio error energy...) over the doses at one site."""

    shape: str
    site: CallSiteFilter = Field(default_factory=CallSiteFilter)  # where it was planted
    metric: str
    label: str
    tolerance: float
    points: list[DosePoint] = Field(default_factory=list)
    tolerated: float | None = None  # where the upper bound reaches the tolerance
    # where the ratio and its lower bound reach it: the limit lies in [tolerated, limit_hi]
    tolerated_point: float | None = None
    limit_hi: float | None = None
    text: str = ""

    @property
    def name(self) -> str:
        return curve_name(self.shape, self.site)

    def usable(self) -> tuple[list[float], list[DosePoint]]:
        """The doses and points that have a ratio and a positive interval."""
        pts = [p for p in self.points if p.ratio and p.ratio_ci and all(x > 0 for x in p.ratio_ci)]
        return [p.dose for p in pts], pts


class Prediction(Record):
    candidate: str
    per_call: float  # the candidate's in-situ rel L1, pooled over its calls
    kinds: dict[str, float] = Field(default_factory=dict)  # its rel L1 per call kind, each on its curve
    shape: str
    metric: str
    predicted: float | None = None
    predicted_ci: list[float] | None = None
    measured: float | None = None  # the candidate's own end-to-end ratio of that reading
    agrees: bool | None = None
    text: str = ""


class StatisticMove(Record):
    """One global statistic (luma mean, sharpness, audio RMS...) over one shape and site's doses: the
    smallest dose at which a seed reads it outside the exact runs' spread."""

    shape: str
    site: CallSiteFilter = Field(default_factory=CallSiteFilter)
    stat: str
    first_outside: float | None = None  # None: within at every dose
    seeds_outside: int = 0  # at that dose
    seeds: int = 0


class SchedulePrediction(Record):
    """A hybrid schedule's end-to-end error predicted from the per-step curves and a candidate's
    in-situ per-step errors: one a hybrid arm ran (measured beside it), or the one proposed."""

    candidate: str
    metric: str
    exact_steps: list[int] = Field(default_factory=list)
    arm: str = ""  # the hybrid arm that ran it ("": proposed)
    predicted: float | None = None
    predicted_ci: list[float] | None = None
    measured: float | None = None
    agrees: bool | None = None
    text: str = ""


class DoseResponse(Record):
    source: str = ""  # another campaign's results.json the curves were read from ("": this one's)
    curves: list[DoseCurve] = Field(default_factory=list)
    predictions: list[Prediction] = Field(default_factory=list)
    # per shape and reading with sites of their own: the tolerated dose per site, most sensitive first
    sensitivity: list[str] = Field(default_factory=list)
    # which statistics move at which dose (what a chaotic trajectory is judged on)
    statistics: list[StatisticMove] = Field(default_factory=list)
    statistics_text: list[str] = Field(default_factory=list)  # one line per shape and site
    # shapes and sites with no curve: every dose's output bitwise the reference's (a site no call
    # reached, or calls that do not reach the output), or no reading measured
    unread: list[str] = Field(default_factory=list)
    schedules: list[SchedulePrediction] = Field(default_factory=list)  # analysis.dose_schedule
    text: str = ""


def log_log_at(x: float, xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """y at ``x`` on the log-log polyline through (xs, ys); None outside the grid."""
    if not xs or not xs[0] <= x <= xs[-1]:
        return None
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
        if x0 <= x <= x1:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0)) if x1 > x0 else 0.0
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    return ys[-1]


def _crossing(xs: Sequence[float], ys: Sequence[float], level: float) -> float | None:
    """The dose where the monotone log-log curve first reaches ``level`` (None: it never does; the
    smallest dose when it starts there): the curve read the other way round."""
    ys = [max(ys[: i + 1]) for i in range(len(ys))]  # monotone: a running maximum
    return xs[0] if ys[0] >= level else log_log_at(level, ys, xs)


def curve_name(shape: str, site: CallSiteFilter) -> str:
    """'noise' (every call), 'noise on steps 1'."""
    return shape if site.everywhere else f"{shape} on {site.text()}"


def _curve(shape: str, site: CallSiteFilter, readings: list[tuple[float, str, RatioReading]]) -> DoseCurve:
    first = readings[0][2]
    c = DoseCurve(shape=shape, site=site, metric=first.metric, label=first.label, tolerance=first.bound)
    shape = curve_name(shape, site)
    c.points = [
        DosePoint(dose=d, arm=a, ratio=r.ratio, ratio_ci=r.ratio_ci, word=r.word) for d, a, r in readings
    ]
    xs, usable = c.usable()
    if len(usable) >= 2:
        c.tolerated = _crossing(xs, [p.ratio_ci[1] for p in usable], c.tolerance)
        c.tolerated_point = _crossing(xs, [p.ratio for p in usable], c.tolerance)
        c.limit_hi = _crossing(xs, [p.ratio_ci[0] for p in usable], c.tolerance)
    grid = f"{len(c.points)} doses {c.points[0].dose:g} to {c.points[-1].dose:g}"
    if c.tolerated is None:
        c.text = f"{shape}, {c.label}: within the tolerance at every dose ({grid}): no limit found below {xs[-1]:g}" \
            if usable else f"{shape}, {c.label}: no interval at any dose ({grid}): no limit read"  # fmt: skip
    else:
        hi = f"{c.limit_hi:.2g}" if c.limit_hi is not None else f"above {xs[-1]:g}"
        mid = f"{c.tolerated_point:.2g}" if c.tolerated_point is not None else f"above {xs[-1]:g}"
        where = f"the ratio reaches {c.tolerance:g}x the floor's at {mid}, its lower bound at {hi}"
        equal = [p.dose for p in c.points if p.ratio == 0.0 and p.dose < xs[0]]  # identical in this measure
        if c.tolerated == xs[0] and usable[0].ratio_ci[1] >= c.tolerance and equal:
            c.tolerated = max(equal)  # the largest dose that left the reading equal to the reference's
            c.text = (
                f"{shape}, {c.label}: tolerated per-call rel L1 {c.tolerated:g} (the largest dose that left "
                f"it equal to the reference's; the upper bound is {ratio_text(usable[0].ratio_ci[1])} at the "
                f"next, {xs[0]:g}); {where}: the limit lies in [{c.tolerated:g}, {hi}] ({grid})"
            )
        elif c.tolerated == xs[0] and usable[0].ratio_ci[1] >= c.tolerance:
            c.tolerated = None  # not one dose measured is tolerated with confidence
            c.text = (
                f"{shape}, {c.label}: no dose measured is tolerated with confidence (the upper bound is "
                f"{ratio_text(usable[0].ratio_ci[1])} at the smallest, {xs[0]:g}); {where} ({grid})"
            )
        else:
            c.text = (
                f"{shape}, {c.label}: tolerated per-call rel L1 {c.tolerated:.2g} (the upper bound reaches "
                f"{c.tolerance:g}x there); {where}: the limit lies in [{c.tolerated:.2g}, {hi}] ({grid})"
            )
    return c


def dose_response(
    verdicts: Sequence, runs: Sequence, measured: dict[str, dict[str, RatioReading]] | None = None
) -> DoseResponse | None:
    """The curves of a campaign's planted arms (None: it has none), one per shape and reading:
    ``measured``'s (``measured_readings``: the final latent's among them), else each verdict's own."""
    planted = {r.arm: r.attn_options for r in runs if r.attn_type == PLANTED and r.repeat == 1}
    measured = measured if measured is not None else measured_readings(verdicts)
    sites: dict[str, CallSiteFilter] = {}  # by their JSON: a site as a grouping key
    by: dict[tuple[str, str, str], list[tuple[float, str, RatioReading]]] = {}
    groups: dict[tuple[str, str], list[tuple[float, Any]]] = {}  # (shape, site) -> (dose, verdict)
    for v in verdicts:
        if v.arm not in planted:
            continue
        opts = planted[v.arm]
        site = CallSiteFilter.model_validate(opts.get("site", {}))
        shape, key, dose = opts.get("shape", "noise"), site.model_dump_json(), float(opts["dose"])
        sites[key] = site
        groups.setdefault((shape, key), []).append((dose, v))
        for r in measured.get(v.arm, {}).values():
            by.setdefault((shape, key, r.metric), []).append((dose, v.arm, r))
    if not groups:
        return None
    out = DoseResponse(
        curves=[
            _curve(shape, sites[key], sorted(rs, key=lambda x: x[0]))
            for (shape, key, _), rs in sorted(by.items(), key=lambda kv: kv[0][2] == LATENT)  # decoded first
        ]
    )
    out.sensitivity = _sensitivity(out.curves)
    with_curve = {(shape, key) for shape, key, metric in by if metric != LATENT}  # the decoded output
    for (shape, key), doses in groups.items():
        doses.sort(key=lambda x: x[0])
        if (shape, key) not in with_curve:
            out.unread.append(_unread_text(shape, sites[key], doses))
        if moves := _statistic_moves(shape, sites[key], doses):
            out.statistics += moves
            out.statistics_text.append(_moves_text(moves, doses[-1][0]))
    out.text = "; ".join(c.text for c in out.curves)
    return out


def _unread_text(shape: str, site: CallSiteFilter, doses: list[tuple[float, Any]]) -> str:
    name, top = curve_name(shape, site), max(d for d, _ in doses)
    if all(v.identical_seeds and len(v.identical_seeds) == len(v.seeds) for _, v in doses):
        return (
            f"{name}: the output is bitwise the reference's at every dose up to {top:g} ({len(doses)} doses): "
            "the error reached no call of the site, or none that reaches the output"
        )
    return f"{name}: no end-to-end reading at any dose ({len(doses)} doses up to {top:g}): no curve"


def _statistic_moves(shape: str, site: CallSiteFilter, doses: list[tuple[float, Any]]) -> list[StatisticMove]:
    """Per judged statistic, the first dose with a seed outside (the verdicts' own stat checks)."""
    moves: dict[str, StatisticMove] = {}
    for dose, v in doses:
        checks: dict[str, list[str]] = {}
        for c in v.stats:
            if c.judged and c.word != "shown":
                checks.setdefault(c.stat, []).append(c.word)
        for stat, words in checks.items():
            m = moves.setdefault(stat, StatisticMove(shape=shape, site=site, stat=stat, seeds=len(words)))
            if m.first_outside is None and OUTSIDE in words:
                m.first_outside, m.seeds_outside = dose, words.count(OUTSIDE)
    return list(moves.values())


def _moves_text(moves: list[StatisticMove], top: float) -> str:
    """'noise, statistics: audio_rms outside from 0.01 (1 of 3 seeds), ...; within up to 0.1: ...'."""
    moved = sorted((m for m in moves if m.first_outside is not None), key=lambda m: m.first_outside)
    still = [m.stat for m in moves if m.first_outside is None]
    bits = [
        f"{m.stat} outside from {m.first_outside:g} ({m.seeds_outside} of {m.seeds} seeds)" for m in moved
    ]
    if still:
        bits.append(f"within at every dose up to {top:g}: {', '.join(still)}")
    return f"{curve_name(moves[0].shape, moves[0].site)}, statistics: {'; '.join(bits)}"


def _limit(c: DoseCurve) -> tuple[float, str]:
    """The tolerated dose and its text, else the grid's end the curve lies beyond (none tolerated: 0,
    'below' the smallest dose; all: inf, 'above' the largest)."""
    if c.tolerated is not None:
        return c.tolerated, f"{c.tolerated:.2g}"
    if c.points and all(p.word == "within" for p in c.points):
        return math.inf, f"above {max(p.dose for p in c.points):g}"
    return 0.0, f"below {min(p.dose for p in c.points):g}"


def _sensitivity(curves: list[DoseCurve]) -> list[str]:
    """Per shape and reading planted at two sites or more: the tolerated dose at each, the most
    sensitive site (the smallest tolerated dose) first."""
    groups: dict[tuple[str, str], list[DoseCurve]] = {}
    for c in curves:
        if not c.site.everywhere and c.usable()[0]:  # a curve with no interval read no limit
            groups.setdefault((c.shape, c.metric), []).append(c)
    lines = []
    for (shape, _), cs in groups.items():
        if len(cs) < 2:
            continue
        order = sorted(cs, key=lambda c: (_limit(c)[0], -c.usable()[1][0].ratio))
        tied = len({_limit(c)[0] for c in cs}) < len(cs)  # equal limits: the ratios say more
        each = ", ".join(
            f"{c.site.text()} {_limit(c)[1]}" + (f" ({ratio_text(p.ratio)} at {p.dose:g})" if tied else "")
            for c in order
            for p in c.usable()[1][:1]  # the smallest dose with an interval
        )
        lines.append(
            f"{shape}, {cs[0].label}, tolerated per-call rel L1 by site (most sensitive first): {each}"
        )
    return lines


def read_at(c: DoseCurve, dose: float) -> list[float] | None:
    """[ratio, lower bound, upper bound] the curve reads at ``dose``; None outside its doses."""
    xs, pts = c.usable()
    got = [log_log_at(dose, xs, [[p.ratio, *p.ratio_ci][i] for p in pts]) for i in range(3)]
    return None if None in got else got


def beside(
    p: Prediction | SchedulePrediction, m: RatioReading | None, lo: float, hi: float, off: str = ""
) -> None:
    """The measured reading ``m`` (where it has a ratio) set beside ``p``'s interval [lo, hi], in its
    text: it agrees within PREDICT_AGREES; ``off`` says a disagreement, else far above or below does."""
    if m is None or not m.ratio:
        return
    p.measured, p.agrees = m.ratio, lo / PREDICT_AGREES <= m.ratio <= hi * PREDICT_AGREES
    if p.agrees:
        why = "agrees"
    elif off:
        why = off
    elif m.ratio > hi * PREDICT_AGREES:
        why = "far above: something the planted error does not model changes the output (a fallback, another op)"
    else:
        why = "far below: the kernel's error is gentler than the planted noise (another shape)"
    p.text += f"; measured {ratio_text(m.ratio)}: {why}"


def predict(
    dr: DoseResponse, candidate: str, per_call: float, measured: dict[str, RatioReading]
) -> list[Prediction]:
    """What ``per_call`` (an in-situ rel L1) predicts end to end on each noise curve, beside the
    candidate's own end-to-end reading of that metric where it has one."""
    out = []
    for c in dr.curves:
        if c.shape != "noise" or not c.site.everywhere:
            continue
        p = Prediction(candidate=candidate, per_call=per_call, shape=c.shape, metric=c.metric)
        got = read_at(c, per_call)
        if got is None:
            xs = c.usable()[0]
            grid = f"{xs[0]:g} to {xs[-1]:g}" if xs else "none"
            p.text = (
                f"{candidate}: per call {per_call:.2g}, outside the doses measured ({grid}): no prediction"
            )
            return [p]  # one line says it for every reading
        p.predicted, lo, hi = got
        p.predicted_ci = [lo, hi]
        p.text = f"{candidate}: per call {per_call:.2g}: predicted {c.label} {ratio_text(p.predicted)} the floor's ({ratio_text(lo)} to {ratio_text(hi)})"  # fmt: skip
        beside(p, measured.get(c.metric), lo, hi)
        out.append(p)
    return out


def unmeasured_rules(tolerance: Any) -> str:
    """The in-situ reading's limits when no dose-response says what per-call error the pipeline
    absorbs: the defaults or the scenario's own, named as such."""
    whose = "the defaults" if tolerance == type(tolerance)() else "the scenario's insitu_tolerance"
    return (
        f"the in-situ limits (at most {tolerance.floor_ratio:g}x the exact floor's per-call error, "
        f"{tolerance.baseline_ratio:g}x the accepted baseline's) are {whose}, not measured: no dose-response "
        "says how much per-call error this pipeline absorbs (a `dose_response:` campaign, read with "
        "`dose_response_from`)"
    )


def read_source(campaign_dir: Path, source: dict) -> tuple[DoseResponse | None, str]:
    """The dose-response the scenario names, as its run kept it in the campaign folder (the file's
    path, sha256 and curves), if that is the file named; else None and why."""
    named, want = f"dose_response_from ({source.get('results')})", str(source.get("sha256", ""))
    try:
        kept = json.loads((campaign_dir / SOURCE_COPY).read_bytes())
        dr = DoseResponse.model_validate(kept["dose_response"])
    except OSError as err:
        return None, f"{named}: {SOURCE_COPY}: {err.strerror or err}: not used"
    except (ValueError, KeyError, TypeError):
        return None, f"{named}: {SOURCE_COPY} holds no dose-response: not used"
    if kept.get("sha256") != want:
        return None, f"{named}: {SOURCE_COPY} is of another file than the scenario names: not used"
    return dr.model_copy(
        update={"predictions": [], "source": f"{source.get('results')} (sha256 {want[:12]})"}
    ), ""


def read_campaign(
    res: Any, readings: Sequence, campaign_dir: Path, measured: dict, source: dict | None = None
) -> tuple[DoseResponse | None, str]:
    """The campaign's own dose-response (of ``res``'s runs and the ``measured`` readings of its arms),
    else the one ``source`` names (with why it is not used), with every in-situ candidate that is no
    planted arm placed on it."""
    dr, why = dose_response(res.verdicts, res.runs, measured), ""
    if dr is None and source:
        dr, why = read_source(campaign_dir, source)
    if dr is None:
        return None, why
    planted = {r.arm for r in res.runs if r.attn_type == PLANTED}
    for r in readings:
        if r.candidate in planted or r.stats.rel_l1 is None or r.stats.rel_l1 <= 0:
            continue
        dr.predictions += predict(dr, r.candidate, r.stats.rel_l1, measured.get(r.candidate, {}))
    return dr, why


def measured_readings(
    verdicts: Sequence, latents: Sequence = (), rules: Any = None
) -> dict[str, dict[str, RatioReading]]:
    """arm -> metric -> its end-to-end reading (the verdict's): what curves are drawn of, and predictions
    set beside. Where an arm saved latents (``latents``: the campaign's LatentSeries, judged by
    ``rules``), its final latent's error energy over the floor runs' of the same seed at the same step
    too; the floor's spread measured where a seed has two runs or more, else the video MSE's stated
    spread is used, as the verdict's latent reading does."""
    out = {v.arm: {e.metric: e for e in v.energy} for v in verdicts}
    if not latents or not rules:
        return out
    floors: dict[str, list] = {}
    for f in latents:
        if f.role == "noise_floor":
            floors.setdefault(str(f.seed), []).append(f)
    seeds_of: dict[str, dict[str, SeedValues]] = {}
    for c in latents:
        if c.arm not in out or not c.points or str(c.seed) in seeds_of.get(c.arm, {}):
            continue
        last = c.points[-1]
        at = [(f.key, p.psnr) for f in floors.get(str(c.seed), []) for p in f.points if p.step == last.step]
        seeds_of.setdefault(c.arm, {})[str(c.seed)] = SeedValues(
            seed=c.seed,
            candidate=energy_from_db(last.psnr),
            floors=[energy_from_db(db) for _, db in at],
            floor_keys=[k for k, _ in at],
        )
    sd, source = rules.stated_sd("video_mse")
    source = f"the video MSE's, {source}" if sd is not None else ""
    for arm, seeds in seeds_of.items():
        out[arm][LATENT] = ratio_reading(
            LATENT,
            LATENT_LABEL,
            list(seeds.values()),
            bound=rules.tolerance,
            alpha=rules.alpha,
            prior_sd=sd,
            source=source,
        )
    return out
