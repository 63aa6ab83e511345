"""Verdicts: a candidate judged seed by seed against the noise floor of that seed, per modality,
with intervals, in one word and one line.

Per seed, the **regime** of each modality comes from that seed's floor (every exact
perturbation of the reference with that seed): video by its pooled PSNR (``pixel`` above
``chaotic_below_db`` + half the band, ``chaotic`` below it - half the band, ``transitional``
between: both kinds of evidence judge there), audio by its waveform correlation (``waveform`` at
``audio_coherent_min_corr`` or more, else ``spectral``). What judges:

* pixel and transitional video: video MSE and 1 - SSIM (``analysis.intervals``: the candidate's
  energy over its seed's floor, combined over seeds with an interval);
* waveform audio: the audio error energy; spectral audio: the mel spectral error; and in every
  audio regime a residual lag the floor does not have;
* chaotic and transitional video: the in-situ reading where one is given (``InsituReading``),
  and the early-step latents, against the accepted baseline (non-inferiority) or, without one,
  an absolute PSNR (never against a floor that differs from the reference by round-off);
* always: the global statistics (``analysis.stat_rule``).

The verdict is outside when any modality is, so each modality's intervals are taken at alpha
divided by the number of modalities judged (and a seed's at that over the number of seeds).

The word: **outside** when any part is; else **incomplete** when a value the floor has is missing
(named); else **within** when every part is; else **inconclusive** (with what would decide it).
``judge`` adds **not run** (no run ended ok) and **invalid** (attention calls not served by the
requested op: the numbers then measure another kernel). A scenario's ``accepted_baseline`` also
gives each candidate a non-inferiority reading against that arm (``baseline``).

``judge_numbers`` works on summary numbers alone (a pull-request table is enough); ``judge``
reads them off comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import Field

from harness.analysis.energy import KINDS, PairErrors, latent_energy, pooled, psnr_from_mse
from harness.analysis.intervals import RatioReading, SeedValues, baseline_reading, ratio_reading
from harness.analysis.stat_rule import StatCheck, StatsSample, judge_stats
from harness.compare.summary import RunSummary, stat_fields
from harness.number_format import fmt_db, ratio_text
from harness.records import Record
from harness.scenario.verdict import VerdictRules

WORDS = ("within", "outside", "inconclusive", "incomplete", "invalid", "not run")
JUDGED_BY = {  # regime -> kinds of energy it judges
    "pixel": ("video_mse", "video_1_ssim"),
    "transitional": ("video_mse", "video_1_ssim"),
    "waveform": ("audio_error",),
    "spectral": ("audio_spectral",),
}


class InsituReading(Record):
    """A candidate's in-situ attention reading (measured inside its own run, against exact attention
    on the same inputs): what a chaotic regime rests on where it exists. Extra fields are ignored."""

    word: str = ""  # within | outside | inconclusive
    ratio: float | None = None  # to the exact floor's in-situ error
    ratio_ci: list[float] | None = None
    text: str = ""


class LatentReading(Record):
    """The early-step latents (the earliest step saved), judged where video is chaotic."""

    judged: bool = False
    against: str = ""  # an accepted baseline's name, or "absolute"
    steps: dict[str, int] = Field(default_factory=dict)  # seed -> step
    psnr: dict[str, float] = Field(default_factory=dict)  # seed -> candidate's PSNR at that step
    reading: RatioReading | None = None  # against the baseline
    word: str = ""
    text: str = ""


class SeedVerdict(Record):
    seed: int | None = None
    regime: dict[str, str] = Field(default_factory=dict)  # video, audio
    floor_psnr: float | None = None
    floor_audio_corr: float | None = None
    floor_runs: int = 0
    ratio: float | None = None  # the largest judged ratio of the seed
    ci: list[float] | None = None
    word: str = ""
    text: str = ""


class Verdict(Record):
    arm: str
    role: str = "candidate"
    keys: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    measured: int = 0  # runs with accuracy metrics
    tolerance: float = 2.0
    word: str = "not run"  # one of WORDS
    ratio: float | None = None  # the largest judged error-energy ratio to the floor (combined over seeds)
    ratio_ci: list[float] | None = None
    ratio_metric: str = ""
    text: str = ""  # the one line a reviewer reads
    per_seed: list[SeedVerdict] = Field(default_factory=list)
    energy: list[RatioReading] = Field(default_factory=list)  # per kind, judged ones first
    shown: list[str] = Field(default_factory=list)  # kinds shown, not judged, with why
    audio_lag: list[str] = Field(default_factory=list)  # residual lags the floor does not have
    latent: LatentReading | None = None
    insitu: InsituReading | None = None
    stats: list[StatCheck] = Field(default_factory=list)
    stats_word: str = ""
    stats_text: str = ""
    baseline: RatioReading | None = None  # non-inferiority against the accepted baseline
    missing: list[str] = Field(default_factory=list)  # what made it incomplete
    floor_runs: int = 0
    attention_ok: bool | None = None
    attention: str = ""
    sentences: list[str] = Field(default_factory=list)
    accuracy: str = ""  # the judgement alone (no attention)
    summary: str = ""  # accuracy; attention

    @property
    def equivalent(self) -> bool:
        """Every judged part within (the only word that supports "equivalent at this tolerance")."""
        return self.word == "within"


def video_regime(floor_psnr: float | None, rules: VerdictRules) -> str:
    if floor_psnr is None or math.isnan(floor_psnr):
        return "not measured"
    half = rules.chaotic_band_db / 2
    if floor_psnr >= rules.chaotic_below_db + half:
        return "pixel"
    return "chaotic" if floor_psnr < rules.chaotic_below_db - half else "transitional"


def _audio_corr(e: PairErrors) -> float | None:
    """The waveform correlation of a pair: its cosine, else the one its SNR implies for tracks of
    equal energy (1 - 10^(-SNR/10) / 2; a table that gives only the SNR)."""
    if e.audio_cosine is not None:
        return e.audio_cosine
    if e.audio_snr_db is None or math.isnan(e.audio_snr_db):
        return None
    return 1.0 - latent_energy(e.audio_snr_db) / 2.0


def _seed_regimes(seed, cand: PairErrors | None, floors: Sequence[PairErrors], rules) -> SeedVerdict:
    sv = SeedVerdict(seed=seed, floor_runs=len(floors))
    if not floors:
        sv.regime = {"video": "no floor", "audio": "no floor"}
        return sv
    mse, _ = pooled(floors, "video_mse")
    sv.floor_psnr = None if mse is None else psnr_from_mse(mse)
    corr = [_audio_corr(f) for f in floors]
    corr = [x for x in corr if x is not None and math.isfinite(x)]
    sv.floor_audio_corr = sum(corr) / len(corr) if corr else None
    audio = "no audio"
    if sv.floor_audio_corr is not None:
        audio = "waveform" if sv.floor_audio_corr >= rules.audio_coherent_min_corr else "spectral"
    sv.regime = {"video": video_regime(sv.floor_psnr, rules), "audio": audio}
    return sv


def _values(kind: str, seeds, cand_of, floors_of) -> list[SeedValues]:
    """Per seed whose floor has ``kind``: the candidate's value and the floor runs'."""
    get = KINDS[kind].get
    out = []
    for s in seeds:
        fl = [(f.key, get(f)) for f in floors_of.get(s, [])]
        fl = [(k, x) for k, x in fl if x is not None]
        if fl:
            c = cand_of.get(s)
            out.append(SeedValues(seed=s, candidate=None if c is None else get(c), floors=[x for _, x in fl],
                                  floor_keys=[k for k, _ in fl]))  # fmt: skip
    return out


def _lag_findings(seeds, cand_of, floors_of) -> list[str]:
    out = []
    for s in seeds:
        c = cand_of.get(s)
        if c is None or not c.audio_residual_lag:
            continue
        if any(f.audio_residual_lag for f in floors_of.get(s, [])):
            continue
        ms = f" ({1000 * c.audio_residual_lag / c.audio_rate:+.1f} ms)" if c.audio_rate else ""
        late = "B late" if c.audio_residual_lag > 0 else "B early"
        out.append(
            f"seed {s}: audio residual lag {c.audio_residual_lag:+d} samples{ms}, {late}, where the floor has none"
        )
    return out


def _latents(seeds, cand_of, base_of, rules: VerdictRules, baseline: str | None) -> LatentReading:
    lr = LatentReading(against=baseline or "absolute")
    pairs = []
    for s in seeds:
        c = cand_of.get(s)
        if c is None or not c.latent_psnr:
            continue
        b = base_of.get(s)
        steps = (
            sorted(set(c.latent_psnr) & set(b.latent_psnr))
            if b is not None and baseline
            else sorted(c.latent_psnr)
        )
        if not steps:
            continue
        k = steps[0]
        lr.steps[str(s)], lr.psnr[str(s)] = k, c.latent_psnr[k]
        if baseline and b is not None:
            pairs.append((s, latent_energy(c.latent_psnr[k]), latent_energy(b.latent_psnr[k])))
    if not lr.steps:
        lr.text = "no latents saved"
        return lr
    if baseline and pairs:
        sd = rules.floor_log_sd["video_mse"]
        lr.reading = baseline_reading("latent", "early-step latent error energy", pairs, baseline=baseline,
                                      margin=rules.baseline_margin, alpha=rules.alpha, sigma=sd, df=math.inf)  # fmt: skip
        lr.word = {"not worse": "within", "worse": "outside"}.get(lr.reading.word, lr.reading.word)
        lr.text = f"matched steps {sorted(set(lr.steps.values()))}: {lr.reading.text}"
        return lr
    low = {s: p for s, p in lr.psnr.items() if not p >= rules.latent_min_psnr_db}
    lr.word = "outside" if low else "within"
    per = ", ".join(f"seed {s} step {lr.steps[s]}: {fmt_db(p)}" for s, p in lr.psnr.items())
    lr.text = (
        f"early-step latent PSNR against the reference ({per}), absolute bound {rules.latent_min_psnr_db:g} dB "
        f"(no accepted baseline; a floor that differs by round-off is no yardstick): {lr.word}"
    )
    return lr


def _combine(words: Sequence[str]) -> str:
    if not words:
        return "incomplete"
    for w in ("outside", "incomplete", "inconclusive"):
        if w in words:
            return w
    return "within"


def _short(r: RatioReading) -> str:
    ci = f" ({r.ratio_ci[0]:.3g}-{r.ratio_ci[1]:.3g})" if r.ratio_ci else ""
    return f"{r.label} {ratio_text(r.ratio)}{ci}"


def judge_numbers(
    arm: str,
    cands: Sequence[PairErrors],
    floors: Sequence[PairErrors],
    *,
    cand_stats: Sequence[StatsSample] = (),
    exact_stats: Sequence[StatsSample] = (),
    rules: VerdictRules | None = None,
    baseline: Sequence[PairErrors] = (),
    insitu: InsituReading | None = None,
) -> Verdict:
    """The verdict of one arm from numbers only: its runs against the reference (one per seed), every
    floor run against the reference of its seed, the statistics, the accepted baseline's runs
    (``rules.accepted_baseline``) and an optional in-situ reading (module docstring)."""
    rules = rules or VerdictRules()
    v = Verdict(arm=arm, keys=[c.key for c in cands], measured=len(cands), tolerance=rules.tolerance,
                seeds=sorted({c.seed for c in cands if c.seed is not None}), floor_runs=len(floors))  # fmt: skip
    if not cands:
        v.word, v.text = "not run", "not measured"
        v.accuracy = v.text
        return v
    seeds = list(dict.fromkeys(c.seed for c in cands))
    cand_of = {c.seed: c for c in cands}
    floors_of: dict = {}
    for f in floors:
        floors_of.setdefault(f.seed, []).append(f)
    base_of = {b.seed: b for b in baseline}
    v.per_seed = [_seed_regimes(s, cand_of.get(s), floors_of.get(s, []), rules) for s in seeds]
    regime_of = {sv.seed: sv.regime for sv in v.per_seed}
    for sv in v.per_seed:
        if sv.regime["video"] == "no floor":
            v.missing.append(f"seed {sv.seed}: no noise-floor run")
    parts: list[tuple[str, str]] = []  # (word, why)
    # The verdict is outside when any modality is: each modality's intervals at alpha / modalities judged.
    judged_modalities = {
        KINDS[k].modality for s in seeds for r in regime_of[s].values() for k in JUDGED_BY.get(r, ())
    }
    alpha = rules.alpha / max(1, len(judged_modalities))
    for kind in ("video_mse", "video_1_ssim", "audio_error", "audio_spectral", "audio_logmel"):
        modality = KINDS[kind].modality
        judged = [s for s in seeds if kind in JUDGED_BY.get(regime_of[s][modality], ())]
        vals = _values(kind, judged or seeds, cand_of, floors_of)
        if not vals:
            continue
        r = ratio_reading(kind, KINDS[kind].label, vals, bound=rules.tolerance, alpha=alpha,
                          prior_sd=rules.floor_log_sd.get(kind, 0.25))  # fmt: skip
        if judged:
            v.energy.append(r)
            parts.append((r.word, r.text))
            v.missing += [s.note for s in r.per_seed if s.word == "incomplete"]
        else:
            why = {"video": "the video floor is chaotic", "audio": "another audio measure judges"}[modality]
            v.shown.append(f"{r.text.split(':')[0]}: not judged ({why})")
    v.audio_lag = _lag_findings(seeds, cand_of, floors_of)
    if v.audio_lag:
        parts.append(("outside", "; ".join(v.audio_lag)))
    chaotic = [s for s in seeds if regime_of[s]["video"] in ("chaotic", "transitional")]
    if chaotic:
        v.latent = _latents(chaotic, cand_of, base_of, rules, rules.accepted_baseline if baseline else None)
        if v.latent.word:
            v.latent.judged = True
            parts.append((v.latent.word, v.latent.text))
        if insitu is not None and insitu.word:
            v.insitu = insitu
            parts.append((insitu.word if insitu.word in WORDS else "inconclusive", insitu.text))
    st = judge_stats(cand_stats, exact_stats, rules)
    v.stats, v.stats_word, v.stats_text = st.checks, st.word, st.text
    if st.word:
        parts.append((st.word, st.text))
        v.missing += [c.text for c in st.checks if c.word == "incomplete"]
    if baseline and rules.accepted_baseline:
        v.baseline = _baseline(v, cand_of, base_of, seeds, regime_of, rules)
    v.word = _combine([w for w, _ in parts]) if parts else "incomplete"
    if v.missing and v.word in ("within", "inconclusive"):
        v.word = "incomplete"
    top = decisive_reading(v)
    if top is not None and top.ratio is not None:
        v.ratio, v.ratio_ci, v.ratio_metric = top.ratio, top.ratio_ci, top.metric
    elif v.insitu is not None:
        v.ratio, v.ratio_ci, v.ratio_metric = v.insitu.ratio, v.insitu.ratio_ci, "insitu"
    _seed_words(v, rules)
    v.text = verdict_text(v, rules)
    v.accuracy = v.text
    v.sentences = [r.text for r in v.energy] + v.shown + v.audio_lag
    if v.latent is not None:
        v.sentences.append(f"latents: {v.latent.text}")
    if v.insitu is not None:
        v.sentences.append(f"in-situ: {v.insitu.text}")
    if st.text:
        v.sentences.append(st.text)
    if v.baseline is not None:
        v.sentences.append(f"against the accepted baseline: {v.baseline.text}")
    identical = sum(c.identical_frames for c in cands)
    if identical:
        frames = sum(c.frames for c in cands)
        v.sentences.append(f"identical frames: {identical} of {frames}, counted in the pooled MSE (MSE 0)")
    return v


def _baseline(v: Verdict, cand_of, base_of, seeds, regime_of, rules: VerdictRules) -> RatioReading | None:
    """Non-inferiority against the accepted baseline, on the kind that judges (video MSE where pixels
    are informative, else the audio kind that judges)."""
    kinds = [r.metric for r in v.energy if r.metric != "audio_logmel"]
    if not kinds:
        return None
    kind = kinds[0]
    sigma = next((r.log_sd for r in v.energy if r.metric == kind), None) or rules.floor_log_sd[kind]
    df = next(
        (r.df for r in v.energy if r.metric == kind and r.spread.startswith("spread measured")), math.inf
    )
    get = KINDS[kind].get
    pairs = [
        (s, get(cand_of[s]) if s in cand_of else None, get(base_of[s]) if s in base_of else None)
        for s in seeds
    ]
    return baseline_reading(kind, KINDS[kind].label, pairs, baseline=str(rules.accepted_baseline),
                            margin=rules.baseline_margin, alpha=rules.alpha, sigma=sigma, df=df or math.inf)  # fmt: skip


def _seed_words(v: Verdict, rules: VerdictRules) -> None:
    for sv in v.per_seed:
        words, worst = [], None
        for r in v.energy:
            sr = next((x for x in r.per_seed if x.seed == sv.seed), None)
            if sr is None:
                continue
            words.append(sr.word)
            if sr.ratio is not None and (worst is None or sr.ratio > worst.ratio):
                worst = sr
        words += [c.word for c in v.stats if c.judged and c.seed == sv.seed]
        if any(f"seed {sv.seed}:" in x for x in v.audio_lag):
            words.append("outside")
        if v.latent is not None and str(sv.seed) in v.latent.psnr and v.latent.word:
            words.append(v.latent.word)
        sv.word = _combine(words) if words else ("incomplete" if not sv.floor_runs else "inconclusive")
        if worst is not None:
            sv.ratio, sv.ci = worst.ratio, worst.ratio_ci
        regime = ", ".join(f"{k} {x}" for k, x in sv.regime.items())
        ratio = f"; ratio {ratio_text(sv.ratio)}" if sv.ratio is not None else ""
        sv.text = f"seed {sv.seed}: {regime} (floor {fmt_db(sv.floor_psnr)}, {sv.floor_runs} run(s)){ratio}: {sv.word}"


def decisive_reading(v: Verdict) -> RatioReading | None:
    """The error-energy reading that decides the verdict's word (the largest ratio among those that
    read the verdict's word, else among all): the one line and the badge both lead with it."""
    decisive = [r for r in v.energy if r.word == v.word] or list(v.energy)
    if not decisive:
        return None
    return max(
        decisive, key=lambda r: r.ratio if r.ratio is not None and math.isfinite(r.ratio) else math.inf
    )


def verdict_text(v: Verdict, rules: VerdictRules) -> str:
    """The one line: the word, the decisive evidence with its interval, the rest briefly."""
    bits: list[str] = []
    judged = [r for r in v.energy]
    top = decisive_reading(v)
    if top is not None:
        head = f"error energy {ratio_text(top.ratio)} the floor's"
        if top.ratio_ci:
            head += (
                f" ({100 * (1 - top.alpha):.10g}% CI {top.ratio_ci[0]:.3g}-{top.ratio_ci[1]:.3g}; {top.label}"
            )
        else:
            head += f" ({top.label}"
        others = [_short(r) for r in judged if r is not top]
        head += ("; " + ", ".join(others) if others else "") + f"), tolerance {rules.tolerance:g}x"
        head += f", {len(v.seeds) or 1} seed(s)"
        if top.word == "inconclusive":
            head += (
                f": about {top.seeds_to_decide} seed(s) would decide it" if top.seeds_to_decide
                else ": no practical number of seeds decides it"
            )  # fmt: skip
        bits.append(head)
    chaotic = [sv for sv in v.per_seed if sv.regime.get("video") == "chaotic"]
    if chaotic:
        psnrs = ", ".join(fmt_db(sv.floor_psnr) for sv in chaotic)
        low = rules.chaotic_below_db - rules.chaotic_band_db / 2
        bits.append(f"pixel metrics uninformative (floor {psnrs} < {low:g} dB)")
    if v.insitu is not None:
        bits.append(f"in-situ: {v.insitu.text or v.insitu.word}")
    if v.latent is not None and v.latent.judged:
        bits.append(f"latents {v.latent.word}")
    elif chaotic and v.insitu is None:
        bits.append("no in-situ reading or latents: the video rests on the statistics")
    bits += v.audio_lag
    if v.stats_text:
        bits.append(v.stats_text)
    if v.baseline is not None:
        b = v.baseline
        ci = (
            f" ({100 * (1 - rules.alpha):.10g}% CI {b.ratio_ci[0]:.3g}-{b.ratio_ci[1]:.3g})"
            if b.ratio_ci
            else ""
        )
        bits.append(f"error energy {ratio_text(b.ratio)} {b.against}{ci}, margin {b.bound:g}x: {b.word}")
    if v.missing:
        bits.append("missing: " + "; ".join(dict.fromkeys(v.missing)))
    if v.word == "within":  # the only word whose intervals support the claim
        bits.append(f"equivalent at {rules.tolerance:g}x: every interval under the tolerance")
    return f"{v.word}: " + "; ".join(bits) if bits else v.word


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


def stats_sample(r: RunSummary) -> StatsSample:
    return StatsSample(key=r.key, seed=r.seed, frames=r.stats.frames if r.stats else None,
                       values=stat_fields(r.stats))  # fmt: skip
