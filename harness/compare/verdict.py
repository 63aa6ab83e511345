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
``judge`` reads them off comparisons.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from pydantic import Field

from harness.compare.pairwise import Comparison
from harness.compare.summary import JUDGED_STATS, SHOWN_STATS, RunSummary, stat_fields
from harness.number_format import fmt_db, fmt_num
from harness.records import Record
from harness.scenario.verdict import VerdictRules

PEAK = 255.0


class PairErrors(Record):
    """One run against the reference, reduced to what a verdict needs (no media)."""

    key: str = ""
    seed: int | None = None
    frames: int = 1  # weight of the video energies when pooling over seeds
    video_mse: float | None = None  # mean of per-frame MSE (uint8 RGB)
    ssim_mean: float | None = None
    psnr_min: float | None = None
    psnr_min_frame: int | None = None
    identical_frames: int = 0
    audio_snr_db: float | None = None  # after the lag search
    audio_logmel_cosine: float | None = None
    latent_step: int | None = None  # earliest step with a latent in both runs
    latent_psnr: float | None = None  # against the reference's range (compare.latents)

    @classmethod
    def from_psnr(cls, psnr_db: float, **kw) -> PairErrors:
        """From a pooled PSNR in dB (e.g. a table in a pull request)."""
        return cls(video_mse=mse_from_psnr(psnr_db), **kw)

    @classmethod
    def from_comparison(cls, c: Comparison) -> PairErrors:
        e = cls(key=c.b.key, seed=c.b.seed)
        if c.video is not None:
            v = c.video
            e.frames, e.video_mse, e.ssim_mean = v.frames, v.mse_mean, v.ssim_mean
            e.psnr_min, e.psnr_min_frame, e.identical_frames = (
                v.psnr_min,
                v.psnr_min_frame,
                v.identical_frames,
            )
        if c.audio is not None:
            e.audio_snr_db, e.audio_logmel_cosine = c.audio.snr_db, c.audio.logmel_cosine
        if c.latents:
            first = min(c.latents, key=lambda p: p.step)
            e.latent_step, e.latent_psnr = first.step, first.psnr
        return e


def mse_from_psnr(psnr_db: float, peak: float = PEAK) -> float:
    return 0.0 if math.isinf(psnr_db) and psnr_db > 0 else peak * peak / 10.0 ** (psnr_db / 10.0)


def psnr_from_mse(mse: float, peak: float = PEAK) -> float:
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)


def _energy_from_db(db: float) -> float:
    return 0.0 if math.isinf(db) and db > 0 else 10.0 ** (-db / 10.0)


def _db_from_energy(e: float) -> float:
    return math.inf if e == 0 else -10.0 * math.log10(e)


# metric -> (label, energy of a pair, weight of a pair, energy -> display value, display format)
_KINDS: dict[str, tuple[str, Callable, Callable, Callable, Callable]] = {
    "video_mse": (
        "video MSE",
        lambda e: e.video_mse,
        lambda e: e.frames,
        psnr_from_mse,
        fmt_db,
    ),
    "video_1_ssim": (
        "video 1 - SSIM",
        lambda e: None if e.ssim_mean is None else max(0.0, 1.0 - e.ssim_mean),
        lambda e: e.frames,
        lambda x: 1.0 - x,
        lambda x: f"SSIM {fmt_num(x, 5)}",
    ),
    "audio_error": (
        "audio error energy",
        lambda e: None if e.audio_snr_db is None else _energy_from_db(e.audio_snr_db),
        lambda e: 1,
        _db_from_energy,
        lambda x: f"SNR {fmt_db(x)}",
    ),
    "audio_logmel": (
        "audio 1 - log-mel cosine",
        lambda e: None if e.audio_logmel_cosine is None else max(0.0, 1.0 - e.audio_logmel_cosine),
        lambda e: 1,
        lambda x: 1.0 - x,
        lambda x: f"log-mel cosine {fmt_num(x, 6)}",
    ),
    "latent": (
        "earliest-step latent MSE",
        lambda e: None if e.latent_psnr is None else _energy_from_db(e.latent_psnr),
        lambda e: 1,
        _db_from_energy,
        fmt_db,
    ),
}


def pooled(pairs: Sequence[PairErrors], metric: str) -> tuple[float | None, int]:
    """(pooled energy, pairs used): the weighted mean (frames for video, 1 otherwise)."""
    _, get, weight, _, _ = _KINDS[metric]
    vals = [(get(p), weight(p)) for p in pairs]
    vals = [(x, w) for x, w in vals if x is not None and math.isfinite(x)]
    if not vals:
        return None, 0
    total = sum(w for _, w in vals)
    return sum(x * w for x, w in vals) / total, len(vals)


class EnergyCheck(Record):
    metric: str
    label: str
    judged: bool = True  # False: shown for information (uninformative here, or not the audio metric used)
    why_not_judged: str = ""
    candidate: float | None = None  # pooled error energy of the candidate
    floor: float | None = None  # pooled error energy of the floor (perturbations x seeds)
    ratio: float | None = None  # candidate / floor
    tolerance: float = 2.0
    within: bool | None = None
    n_candidate: int = 0
    n_floor: int = 0
    floor_band: list[float] = Field(default_factory=list)  # display values: min, median, max
    per_seed: dict[str, float] = Field(default_factory=dict)  # seed -> ratio against the pooled floor
    text: str = ""


def ratio_text(r: float | None) -> str:
    """1.27x, 34.3x, 3.6e+08x: two decimals near the tolerance, three figures beyond."""
    if r is None:
        return "n/a"
    if math.isinf(r):
        return "inf"
    return f"{r:.2f}x" if r < 10 else f"{r:.3g}x"


def _band(floors: Sequence[PairErrors], metric: str) -> list[float]:
    _, get, _, show, _ = _KINDS[metric]
    vals = sorted(show(x) for x in (get(p) for p in floors) if x is not None and math.isfinite(x))
    if not vals:
        return []
    return [vals[0], statistics.median(vals), vals[-1]]


def energy_check(
    metric: str,
    cands: Sequence[PairErrors],
    floors: Sequence[PairErrors],
    tolerance: float,
    *,
    judged: bool = True,
    why_not_judged: str = "",
) -> EnergyCheck | None:
    """The candidate's pooled energy over the floor's; None when the candidate has none of it."""
    label, get, _, show, fmt = _KINDS[metric]
    cand, n_c = pooled(cands, metric)
    if cand is None:
        return None
    floor, n_f = pooled(floors, metric)
    chk = EnergyCheck(
        metric=metric,
        label=label,
        judged=judged,
        why_not_judged=why_not_judged,
        candidate=cand,
        floor=floor,
        tolerance=tolerance,
        n_candidate=n_c,
        n_floor=n_f,
        floor_band=_band(floors, metric),
    )
    shown_c = fmt(show(cand))
    if floor is None:
        chk.judged = False
        chk.text = f"{label}: candidate {shown_c}; no noise floor measured"
        return chk
    if floor == 0.0:
        chk.ratio = 1.0 if cand == 0.0 else math.inf
    else:
        chk.ratio = cand / floor
        for p in cands:
            x = get(p)
            if x is not None and p.seed is not None:
                chk.per_seed[str(p.seed)] = x / floor
    chk.within = chk.ratio <= tolerance
    band = chk.floor_band
    band_txt = (
        f"{fmt(band[0])} / {fmt(band[1])} / {fmt(band[2])} (min / median / max of {n_f})"
        if len(band) == 3 and n_f > 1
        else fmt(show(floor))
    )
    head = f"{label} {ratio_text(chk.ratio)} the floor's: candidate {shown_c} pooled over {n_c} run(s), floor {fmt(show(floor))} pooled, band {band_txt}"
    if floor == 0.0 and cand > 0.0:
        head += " (every floor run is identical to the reference; the candidate is not)"
    if len(chk.per_seed) > 1:
        head += "; per seed " + ", ".join(f"{s}: {ratio_text(r)}" for s, r in chk.per_seed.items())
    if chk.judged:
        word = "within" if chk.within else "outside the floor"
        chk.text = f"{head}; tolerance {tolerance:g}x: {word}"
    else:
        chk.text = f"{head}; not judged ({why_not_judged})"
    return chk


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
    audio_low = floor_audio is not None and _db_from_energy(floor_audio) < rules.audio_snr_min_db
    audio_used = "audio_logmel" if audio_low else "audio_error"
    audio_other_why = (
        f"the floor's audio SNR {fmt_db(_db_from_energy(floor_audio))} < {rules.audio_snr_min_db:g} dB: "
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
