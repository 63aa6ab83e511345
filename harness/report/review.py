"""The review at a glance: per candidate its verdict word, its error ratio to the noise floor and its
speed-up, each with an interval; the points of the speed-against-accuracy figure.

The page's badges, its figure and the GitHub job summary read these ``Reading`` records and nothing
else: every verdict's ``word``, ``ratio`` and ``ratio_ci`` (the largest judged error-energy ratio to
the floor, combined over seeds, with its interval; an in-situ reading's where a chaotic verdict rests
on one) and every speed test's ``speedup``, ``speedup_ci`` and ``word`` (``analysis.verdict``,
``compare.significance``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.analysis.model import ReportResults, SpeedTest, Verdict
from harness.number_format import NA, fmt_speedup, ratio_text

WORDS = ("within", "outside", "inconclusive", "incomplete", "invalid", "not run")


@dataclass(frozen=True)
class Terms:
    """A number with its interval and what the interval is."""

    value: float | None = None
    ci: tuple[float, float] | None = None
    ci_what: str = ""  # "95 % CI", "range over seeds"
    word: str = ""


@dataclass(frozen=True)
class Reading:
    """One candidate at the top of the page."""

    arm: str
    word: str
    ratio: Terms
    ratio_what: str  # what the ratio measures: "video MSE / the floor's", "in-situ error / ..."
    tolerance: float
    regime: str
    step: Terms  # DiT s/step speed-up
    total: Terms  # pipeline-total speed-up
    baseline: bool  # the scenario's accepted baseline
    text: str  # the verdict in words


def accepted_baseline(res: ReportResults) -> str | None:
    """The arm the scenario names as the accepted baseline (``accepted_baseline``, top level or in
    ``verdict``), if any."""
    s = res.scenario or {}
    name = s.get("accepted_baseline") or (s.get("verdict") or {}).get("accepted_baseline")
    return str(name) if name else None


def pair(x: Any) -> tuple[float, float] | None:
    if isinstance(x, list | tuple) and len(x) == 2 and all(isinstance(v, int | float) for v in x):
        return float(x[0]), float(x[1])
    return None


def regime(v: Verdict) -> str:
    """The video regime of a verdict's seeds: one word when they agree, else "mixed"."""
    found = {sv.regime.get("video", "") for sv in v.per_seed}
    return found.pop() if len(found) == 1 else ("mixed" if found else "not measured")


def verdict_terms(res: ReportResults, v: Verdict) -> tuple[str, Terms, str]:
    """(word, ratio with its interval, what the ratio is) of a verdict."""
    word = v.word if v.word in WORDS else "inconclusive"
    insitu = res.insitu.reading(v.arm) if res.insitu is not None and regime(v) == "chaotic" else None
    if insitu is not None and insitu.ratio is not None:
        ci = pair(insitu.ratio_ci)
        return (
            word,
            Terms(float(insitu.ratio), ci, "95 % CI" if ci else ""),
            "in-situ error / the exact floor's",
        )
    if v.ratio is None:
        return word, Terms(), ""
    ci = pair(v.ratio_ci)
    label = next((r.label for r in v.energy if r.metric == v.ratio_metric), "error energy")
    level = next((r.alpha for r in v.energy if r.metric == v.ratio_metric), 0.05)
    return (
        word,
        Terms(float(v.ratio), ci, f"{100 * (1 - level):.10g} % CI" if ci else ""),
        f"{label} / the floor's",
    )


def speed_terms(t: SpeedTest | None) -> Terms:
    """Speed-up (reference time / arm time) with its interval and the test's word."""
    if t is None or not t.measured or t.speedup is None:
        return Terms(word="no timing")
    ci = pair(t.speedup_ci)
    return Terms(float(t.speedup), ci, f"{100 * (1 - t.alpha):.10g} % CI" if ci else "", t.word)


def readings(res: ReportResults) -> list[Reading]:
    """One reading per candidate verdict, in the report's order."""
    base = accepted_baseline(res)
    out = []
    for v in res.verdicts:
        if v.role != "candidate":
            continue
        word, ratio, what = verdict_terms(res, v)
        agg = res.arm(v.arm)
        tests = agg.speed if agg is not None else {}
        runs = [r for r in res.runs if r.arm == v.arm]
        text = v.text or v.summary
        if word == "not run" and runs:
            r = runs[0]
            text = r.status + (f": {r.reason}" if r.reason else "")
        out.append(
            Reading(
                arm=v.arm,
                word=word,
                ratio=ratio,
                ratio_what=what,
                tolerance=v.tolerance,
                regime=regime(v),
                step=speed_terms(tests.get("s_per_step")),
                total=speed_terms(tests.get("pipeline_total_s")),
                baseline=v.arm == base,
                text=text,
            )
        )
    return out


FLOOR_METRICS = ("video_mse", "video_1_ssim", "audio_error", "audio_spectral")


def floor_energy(c: Any, metric: str) -> float | None:
    """One comparison's error energy of ``metric`` (as ``analysis.energy`` defines it)."""
    if metric in ("video_mse", "video_1_ssim") and c.video is not None:
        if metric == "video_mse":
            return c.video.mse_mean
        return None if c.video.ssim_mean is None else max(0.0, 1.0 - c.video.ssim_mean)
    if metric == "audio_error" and c.audio is not None and c.audio.snr_db is not None:
        return 0.0 if math.isinf(c.audio.snr_db) and c.audio.snr_db > 0 else 10.0 ** (-c.audio.snr_db / 10.0)
    if metric == "audio_spectral" and c.audio is not None and c.audio.spectral_error is not None:
        return c.audio.spectral_error
    if metric == "audio_logmel" and c.audio is not None and c.audio.logmel_cosine is not None:
        return max(0.0, 1.0 - c.audio.logmel_cosine)
    return None


@dataclass(frozen=True)
class FloorPoint:
    arm: str
    speedup: Terms
    ratio: float  # its own error energy / the pooled floor's, on ``metric``
    metric: str


def floor_points(res: ReportResults) -> list[FloorPoint]:
    """The exact noise-floor arms on the same axes: their speed-up and their own error energy over the
    floor's (the mean of every seed's floor runs), on the metric the candidates' verdicts judge most
    (video MSE by default)."""
    checks = [r for v in res.verdicts for r in v.energy if r.metric in FLOOR_METRICS]
    if not checks:
        return []
    names = [c.metric for c in checks]
    metric = max(set(names), key=lambda m: (names.count(m), m == "video_mse"))
    floors = [s.floor for s in next(c for c in checks if c.metric == metric).per_seed if s.floor]
    pooled = sum(floors) / len(floors) if floors else None
    out = []
    for arm in res.noise_floor_arms:
        vals = [(floor_energy(c, metric), c.video.frames if c.video and metric.startswith("video") else 1)
                for c in res.comparisons if c.b.arm == arm and c.measured]  # fmt: skip
        vals = [(x, w) for x, w in vals if x is not None and math.isfinite(x)]
        if not vals or not pooled:
            continue
        energy = sum(x * w for x, w in vals) / sum(w for _, w in vals)
        agg = res.arm(arm)
        sp = speed_terms(agg.speed.get("s_per_step") if agg is not None else None)
        out.append(FloorPoint(arm, sp, energy / pooled, metric))
    return out


def interval_text(t: Terms, fmt) -> str:
    """'[0.31, 1.05] 95 % CI' or ''."""
    return f" [{fmt(t.ci[0])}, {fmt(t.ci[1])}] {t.ci_what}" if t.ci is not None else ""


def ratio_line(r: Reading) -> str:
    """'error energy 27.5x the floor's [12.1x, 40.2x] range over seeds (video MSE), tolerance 2x'."""
    if r.ratio.value is None:
        return f"no error ratio ({r.regime}), tolerance {r.tolerance:g}x"
    what = r.ratio_what.removesuffix(" / the floor's").removesuffix(" / the exact floor's")
    return (
        f"{ratio_text(r.ratio.value)} the floor's{interval_text(r.ratio, ratio_text)} ({what}), "
        f"tolerance {r.tolerance:g}x"
    )


def speed_cell(t: Terms) -> str:
    """'0.57x [0.31x, 1.05x] 95 % CI: no significant difference', or 'no timing'."""
    if t.value is None:
        return t.word or "no timing"
    return f"{fmt_speedup(t.value)}{interval_text(t, fmt_speedup)}: {t.word or NA}"


def speed_line(what: str, t: Terms) -> str:
    """'DiT s/step speed-up 0.57x [0.31x, 1.05x] 95 % CI: no significant difference'."""
    return f"{what}: {speed_cell(t)}" if t.value is None else f"{what} speed-up {speed_cell(t)}"


@dataclass(frozen=True)
class Badge:
    reading: Reading
    css: str  # the word as a CSS class: within, outside, inconclusive, incomplete, invalid, not-run
    ratio: str  # ratio_line
    step: str  # speed_line of DiT s/step
    total: str  # speed_line of the pipeline total
    note: str = ""  # why a run is missing or invalid


@dataclass(frozen=True)
class ReviewView:
    """The top of the page: a badge per candidate and the speed-against-accuracy figure."""

    badges: list[Badge]
    figure: str | None  # the figure's path as the page links it
    reference: str
    floor: str
    tolerance: float
    regime_note: str = ""


def badge(r: Reading) -> Badge:
    return Badge(
        reading=r,
        css=r.word.replace(" ", "-"),
        ratio=ratio_line(r),
        step=speed_line("DiT s/step", r.step),
        total=speed_line("pipeline total", r.total),
        note=r.text
        if r.word == "not run"
        else ("attention INVALID: see the attention calls" if r.word == "invalid" else ""),
    )


def review_view(res: ReportResults, figure: str | None) -> ReviewView:
    cands = readings(res)
    chaotic = [r.arm for r in cands if r.regime == "chaotic"]
    note = (
        "the floor is chaotic (exact attention alone changes the video): the ratio of "
        + ", ".join(chaotic)
        + " is its in-situ or earliest-step latent error, not a pixel metric"
        if chaotic
        else ""
    )
    return ReviewView(
        badges=[badge(r) for r in cands],
        figure=figure,
        reference=res.reference_arm or "none",
        floor=", ".join(res.noise_floor_arms) or "none",
        tolerance=cands[0].tolerance if cands else res.rules.tolerance,
        regime_note=note,
    )
