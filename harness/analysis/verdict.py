"""Verdicts: a candidate judged by its error energy against the noise floor's, in plain words.

The noise floor is a distribution: every exact perturbation (K/V order reversed, K/V in
chunks, another exact kernel) against the reference, over every seed. A candidate's error
energy against the reference, pooled over frames and seeds, is divided by the floor's pooled
energy of the same kind:

* video: MSE on decoded RGB (pooled, so one identical frame neither lifts nor sinks it),
  and 1 - SSIM;
* audio: the waveform error energy (10^(-SNR/10), after the lag search), or 1 - log-mel
  cosine when the floor's own SNR is below ``audio_snr_min_db``;
* latents: the MSE of the earliest step both runs saved, against the reference's range.

A ratio at most ``tolerance`` is "within". When the floor's pooled PSNR is below
``chaotic_below_db`` the exact runs already give a different video: pixel and audio pair
metrics are shown as uninformative and the verdict rests on the earliest-step latent ratio
(where latents exist) and on the global statistics. Statistics that are means or standard
deviations (and frame counts) are judged against the spread of all exact runs of the same
seed, widened by ``stats_rel_tol`` of their mean; extreme values (peaks) are shown only.
A candidate is "equivalent at this tolerance" when every judged part holds.

``judge_numbers`` works on summary numbers alone (a pull-request table is enough);
``judge`` reads them off comparisons. The energies and their ratios are ``analysis.energy``'s.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import Field

from harness.analysis.energy import (
    EnergyCheck,
    PairErrors,
    db_from_energy,
    energy_check,
    pooled,
    psnr_from_mse,
)
from harness.compare.pairwise import Comparison
from harness.compare.summary import JUDGED_STATS, SHOWN_STATS, RunSummary, stat_fields
from harness.number_format import fmt_db, ratio_text
from harness.records import Record
from harness.scenario.verdict import VerdictRules


class StatsSample(Record):
    """One run's global statistics (names of ``summary.stat_fields``)."""

    key: str = ""
    seed: int | None = None
    values: dict[str, float | None] = Field(default_factory=dict)


class StatCheck(Record):
    seed: int | None = None
    stat: str
    value: float
    lo: float  # min(exact) - rel_tol * |center|
    hi: float  # max(exact) + rel_tol * |center|
    center: float  # mean of the exact runs
    spread: float  # max - min of the exact runs
    exact_runs: int
    judged: bool = True  # False: an extreme value, shown only
    ok: bool


def stats_rule_text(rel_tol: float) -> str:
    return (
        f"x inside [min(exact) - {rel_tol:g}|mean(exact)|, max(exact) + {rel_tol:g}|mean(exact)|], exact = the "
        "reference and every noise-floor run of the same seed; judged: "
        + ", ".join(JUDGED_STATS)
        + "; shown only (extreme values): "
        + ", ".join(SHOWN_STATS)
    )


def stat_checks(
    cands: Sequence[StatsSample], exact: Sequence[StatsSample], rel_tol: float
) -> list[StatCheck]:
    out: list[StatCheck] = []
    for c in cands:
        runs = [e for e in exact if e.seed == c.seed]
        for name in (*JUDGED_STATS, *SHOWN_STATS):
            x = c.values.get(name)
            ref = [e.values.get(name) for e in runs]
            ref = [r for r in ref if r is not None]
            if x is None or not ref:
                continue
            center = statistics.fmean(ref)
            lo, hi = min(ref) - rel_tol * abs(center), max(ref) + rel_tol * abs(center)
            out.append(
                StatCheck(
                    seed=c.seed,
                    stat=name,
                    value=x,
                    lo=lo,
                    hi=hi,
                    center=center,
                    spread=max(ref) - min(ref),
                    exact_runs=len(ref),
                    judged=name in JUDGED_STATS,
                    ok=lo <= x <= hi,
                )
            )
    return out


class Verdict(Record):
    arm: str
    role: str = "candidate"
    keys: list[str] = Field(default_factory=list)  # the runs judged (one per seed)
    seeds: list[int] = Field(default_factory=list)
    measured: int = 0  # runs with accuracy metrics
    tolerance: float = 2.0
    regime: str = "not measured"  # pixel | chaotic | no floor | not measured
    floor_psnr: float | None = None  # the floor's pooled video PSNR (dB)
    floor_runs: int = 0
    energy: list[EnergyCheck] = Field(default_factory=list)
    within_noise_floor: bool | None = None  # every judged energy check within the tolerance
    stats_inside: bool | None = None  # every judged statistic inside
    stats: list[StatCheck] = Field(default_factory=list)
    stats_tolerance: str = ""
    equivalent: bool | None = None  # within (where judged) and inside: "equivalent at this tolerance"
    attention_ok: bool | None = None
    attention: str = ""
    sentences: list[str] = Field(default_factory=list)
    accuracy: str = ""  # the judgement alone (no attention): what the summary starts with
    summary: str = ""


def _stats_sentence(checks: list[StatCheck], many_seeds: bool) -> tuple[bool | None, str]:
    judged = [s for s in checks if s.judged]
    if not judged:
        return None, ""
    shown = sorted({s.stat for s in checks if not s.judged})
    tail = f" ({', '.join(shown)} shown, not judged)" if shown else ""
    outside = [s for s in judged if not s.ok]
    if not outside:
        return True, f"global statistics: all {len(judged)} judged inside the exact runs' spread{tail}"
    bits = [
        f"{s.stat}{f' (seed {s.seed})' if many_seeds else ''} {s.value:.4g} outside [{s.lo:.4g}, {s.hi:.4g}]"
        for s in outside
    ]
    return False, (
        f"global statistics: {len(outside)} of {len(judged)} judged outside the exact runs' spread: "
        + "; ".join(bits)
        + tail
    )


def judge_numbers(
    arm: str,
    cands: Sequence[PairErrors],
    floors: Sequence[PairErrors],
    *,
    cand_stats: Sequence[StatsSample] = (),
    exact_stats: Sequence[StatsSample] = (),
    rules: VerdictRules | None = None,
) -> Verdict:
    """The verdict of one arm from numbers only: its runs against the reference (one per seed),
    every floor run against the reference (perturbations x seeds) and the statistics."""
    rules = rules or VerdictRules()
    tol = rules.tolerance
    v = Verdict(
        arm=arm,
        keys=[c.key for c in cands],
        seeds=sorted({c.seed for c in cands if c.seed is not None}),
        measured=len(cands),
        tolerance=tol,
        floor_runs=len(floors),
        stats_tolerance=stats_rule_text(rules.stats_rel_tol),
    )
    if not cands:
        v.regime = "not measured"
        v.accuracy = "not measured"
        return v
    floor_mse, _ = pooled(floors, "video_mse")
    v.floor_psnr = None if floor_mse is None else psnr_from_mse(floor_mse)
    chaotic = v.floor_psnr is not None and v.floor_psnr < rules.chaotic_below_db
    v.regime = "no floor" if not floors else ("chaotic" if chaotic else "pixel")
    uninformative = (
        f"floor {fmt_db(v.floor_psnr)} < {rules.chaotic_below_db:g} dB: the exact runs differ as much"
    )

    floor_audio, _ = pooled(floors, "audio_error")
    audio_low = floor_audio is not None and db_from_energy(floor_audio) < rules.audio_snr_min_db
    audio_used = "audio_logmel" if audio_low else "audio_error"
    audio_other_why = (
        f"the floor's audio SNR {fmt_db(db_from_energy(floor_audio))} < {rules.audio_snr_min_db:g} dB: "
        "the log-mel cosine judges the audio"
        if audio_low
        else "the waveform error energy judges the audio"
    )
    plan = [
        ("video_mse", not chaotic, uninformative),
        ("video_1_ssim", not chaotic, uninformative),
        (audio_used, not chaotic, uninformative),
        ("audio_logmel" if audio_used == "audio_error" else "audio_error", False, audio_other_why),
        ("latent", chaotic, "shown; judged when pixel metrics are uninformative"),
    ]
    for metric, judged, why in plan:
        chk = energy_check(metric, cands, floors, tol, judged=judged, why_not_judged="" if judged else why)
        if chk is not None:
            v.energy.append(chk)
    judged_checks = [c for c in v.energy if c.judged and c.within is not None]
    if judged_checks:
        v.within_noise_floor = all(c.within for c in judged_checks)

    v.stats = stat_checks(cand_stats, exact_stats, rules.stats_rel_tol)
    v.stats_inside, stats_sentence = _stats_sentence(v.stats, len(v.seeds) > 1)

    parts: list[str] = []
    if v.regime == "no floor":
        parts.append("no noise floor to judge the error energy against")
    elif v.regime == "chaotic":
        parts.append(f"pixel metrics uninformative (floor {fmt_db(v.floor_psnr)})")
        lat = next((c for c in judged_checks if c.metric == "latent"), None)
        if lat is not None:
            parts.append(
                f"step-{_latent_step(cands)} latent error energy {ratio_text(lat.ratio)} the floor's, "
                f"tolerance {tol:g}x: {'within' if lat.within else 'outside the floor'}"
            )
    elif judged_checks:
        worst = max(judged_checks, key=lambda c: c.ratio if c.ratio is not None else -1.0)
        others = [c for c in judged_checks if c is not worst]
        more = "; " + ", ".join(f"{c.label} {ratio_text(c.ratio)}" for c in others) if others else ""
        word = "within" if v.within_noise_floor else "outside the floor"
        parts.append(
            f"error energy {ratio_text(worst.ratio)} the floor's ({worst.label}{more}), tolerance {tol:g}x: {word}"
        )
    if v.stats_inside is True:
        parts.append("statistics within the exact runs' spread")
    elif v.stats_inside is False:
        parts.append("statistics OUTSIDE the exact runs' spread")
    if v.regime != "no floor":
        verdicts = [x for x in (v.within_noise_floor, v.stats_inside) if x is not None]
        if verdicts:
            v.equivalent = all(verdicts)
            parts.append(
                "equivalent at this tolerance" if v.equivalent else "NOT equivalent at this tolerance"
            )
        else:
            parts.append("not judged (nothing comparable measured)")
    v.accuracy = "; ".join(parts)

    if v.regime == "chaotic":
        v.sentences.append(
            f"pixel and audio pair metrics are uninformative: the floor's pooled video PSNR is "
            f"{fmt_db(v.floor_psnr)}, below {rules.chaotic_below_db:g} dB, so exact attention alone already "
            "gives a different video; the verdict rests on the earliest-step latents (where saved) and the "
            "global statistics"
        )
    v.sentences += [c.text for c in v.energy]
    identical = sum(c.identical_frames for c in cands)
    if identical:
        frames = sum(c.frames for c in cands)
        v.sentences.append(f"identical frames: {identical} of {frames}, counted in the pooled MSE (MSE 0)")
    if stats_sentence:
        v.sentences.append(stats_sentence)
        v.sentences.append(f"statistics rule: {v.stats_tolerance}")
    return v


def _latent_step(cands: Sequence[PairErrors]) -> int:
    steps = [c.latent_step for c in cands if c.latent_step is not None]
    return min(steps) if steps else 1


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


def _stats_sample(r: RunSummary) -> StatsSample:
    return StatsSample(key=r.key, seed=r.seed, values=stat_fields(r.stats))


def judge(
    arm: str,
    cands: list[Comparison],
    floors: list[Comparison],
    *,
    runs: list[RunSummary] | None = None,
    rules: VerdictRules | None = None,
) -> Verdict:
    """Verdict for one arm: ``cands`` are its runs against the reference (one per seed),
    ``floors`` every noise-floor run against the reference of its seed (may be empty);
    ``runs`` every run of the arm (repeats included) for the attention check."""
    rules = rules or VerdictRules()
    runs = runs if runs is not None else [c.b for c in cands]
    measured = [c for c in cands if c.measured]
    floor_ok = [f for f in floors if f.measured]
    exact: dict[str, RunSummary] = {}
    for c in measured:
        if c.a.stats is not None:
            exact[c.a.key] = c.a
    for f in floor_ok:
        if f.b.stats is not None:
            exact[f.b.key] = f.b
    v = judge_numbers(
        arm,
        [PairErrors.from_comparison(c) for c in measured],
        [PairErrors.from_comparison(f) for f in floor_ok],
        cand_stats=[_stats_sample(c.b) for c in measured if c.b.stats is not None],
        exact_stats=[_stats_sample(r) for r in exact.values()],
        rules=rules,
    )
    v.role = runs[0].role if runs else "candidate"
    v.keys = [r.key for r in runs if r.repeat == 1] or v.keys
    v.seeds = sorted({r.seed for r in runs if r.seed is not None})
    head: list[str] = []
    not_ok = [r for r in runs if not r.ok]
    by_reason: dict[tuple[str, str | None], list[str]] = {}
    for r in not_ok:
        by_reason.setdefault((r.status, r.reason), []).append(r.key)
    for (status, reason), keys in by_reason.items():
        who = keys[0] if len(keys) == 1 else f"{len(keys)} runs ({', '.join(keys)})"
        head.append(f"{who} not measured: status {status}" + (f" ({reason})" if reason else ""))
    for c in cands:
        if c.b.ok and not c.measured:
            head.append(f"{c.b.key}: " + "; ".join(c.notes or ["not measured"]))
    v.sentences = head + v.sentences
    v.attention_ok, v.attention = attention_verdict(runs)
    v.sentences.append(f"attention: {v.attention}")
    if not measured:
        first = next((r for r in not_ok if r.reason), None)
        v.accuracy = "not measured" + (f" ({first.status}: {first.reason})" if first else "")
        v.accuracy += f"; not judged (tolerance {rules.tolerance:g}x)"
    attn = {True: "attention valid", False: "attention INVALID", None: "attention not verified"}[
        v.attention_ok
    ]
    v.summary = f"{v.accuracy}; {attn}"
    return v
