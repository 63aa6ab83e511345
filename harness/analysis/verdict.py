"""Verdicts (docs/verdicts.md): a candidate judged seed by seed against the noise floor of that seed, per
modality, in one word and one line. ``judge_numbers`` needs summary numbers alone (a pull request's
table); ``judge`` reads them off an arm's comparisons and adds what its runs say of themselves."""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.analysis.energy import AUDIO_COSINE, AUDIO_SNR, KINDS, PairErrors, is_identical, pooled_psnr
from harness.analysis.intervals import RatioReading, SeedValues, baseline_reading, ratio_reading
from harness.analysis.stat_rule import StatsSample, judge_stats
from harness.analysis.structure import FrameCounts, judge_structure
from harness.analysis.verdict_model import (
    InsituReading,
    LatentReading,
    SeedVerdict,
    Verdict,
    check_floor,
    deciding_part,
    decisive_reading,
    settled_text,
    verdict_text,
)
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary, stat_fields
from harness.metrics.metric import energy_from_db
from harness.number_format import fmt_db, ratio_text, ratio_value
from harness.rule import (
    IDENTICAL,
    INCOMPLETE,
    INCONCLUSIVE,
    INVALID,
    NOT_RUN,
    OUTSIDE,
    WITHIN,
    combine,
    known,
)
from harness.run_keys import sample_key
from harness.scenario.verdict import VerdictRules

LAG_MARGIN_SAMPLES = 2  # a residual lag is judged beyond the floor's largest by more than this
LAG_MARGIN_MS = 0.5  # or this, whichever is larger
FAR_BELOW = 0.25  # a candidate whose interval lies under this fraction of the floor says more of the floor
JUDGED_BY = {  # regime -> kinds of energy it judges
    "pixel": ("video_mse", "video_1_ssim"),
    "transitional": ("video_mse", "video_1_ssim"),
    "waveform": ("audio_error",),
    "spectral": ("audio_spectral",),
}


def video_regime(floor_psnr: float | None, rules: VerdictRules) -> str:
    if floor_psnr is None or math.isnan(floor_psnr):
        return "not measured"
    half = rules.chaotic_band_db / 2
    if floor_psnr >= rules.chaotic_below_db + half:
        return "pixel"
    return "chaotic" if floor_psnr < rules.chaotic_below_db - half else "transitional"


def _audio_corr(e: PairErrors) -> float | None:
    """A pair's waveform correlation: its cosine, else its SNR's for tracks of equal energy (a table's)."""
    cosine, snr = e.value(AUDIO_COSINE), e.value(AUDIO_SNR)  # signed; at the container's alignment
    if cosine is not None:
        return cosine
    if snr is None or math.isnan(snr):
        return None
    return 1.0 - energy_from_db(snr) / 2.0


def _seed_regimes(seed, floors: Sequence[PairErrors], rules) -> SeedVerdict:
    sv = SeedVerdict(seed=seed, floor_runs=len(floors))
    if not floors:
        sv.regime = {"video": "no floor", "audio": "no floor"}
        return sv
    sv.floor_psnr = pooled_psnr(floors)
    corr = [x for f in floors if (x := _audio_corr(f)) is not None and math.isfinite(x)]
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
        fl = [(f.key, x) for f in floors_of.get(s, []) if (x := get(f)) is not None]
        if fl:
            c = cand_of.get(s)
            out.append(SeedValues(seed=s, candidate=None if c is None else get(c), floors=[x for _, x in fl],
                                  floor_keys=[k for k, _ in fl]))  # fmt: skip
    return out


def _lag_findings(seeds, cand_of, floors_of) -> list[str]:
    """A candidate's residual audio lag beyond every floor run's of its seed (by the LAG_MARGIN_*)."""
    out = []
    for s in (s for s in seeds if s in cand_of and cand_of[s].audio_residual_lag):
        c = cand_of[s]
        most = max((abs(f.audio_residual_lag or 0) for f in floors_of.get(s, [])), default=0)
        margin = max(LAG_MARGIN_SAMPLES, (c.audio_rate or 0) * LAG_MARGIN_MS / 1000)
        if abs(c.audio_residual_lag) <= most + margin:
            continue
        ms = f" ({1000 * c.audio_residual_lag / c.audio_rate:+.1f} ms)" if c.audio_rate else ""
        late = "B late" if c.audio_residual_lag > 0 else "B early"
        floor = f"the floor's largest is {most} sample(s)" if most else "the floor has none"
        out.append(
            f"seed {s}: audio residual lag {c.audio_residual_lag:+d} samples{ms}, {late}, where {floor}"
        )
    return out


def _latents(seeds, cand_of, base_of, rules: VerdictRules, baseline: str | None) -> LatentReading:
    lr = LatentReading(against=baseline or "absolute")
    pairs = []
    for s in (s for s in seeds if s in cand_of):
        c, b = cand_of[s], base_of.get(s)
        both = baseline and b is not None
        k = min(set(c.latent_psnr) & set(b.latent_psnr) if both else c.latent_psnr, default=None)
        if k is None:  # no latents saved (by both)
            continue
        lr.steps[str(s)], lr.psnr[str(s)] = k, c.latent_psnr[k]
        if both:
            pairs.append((s, energy_from_db(c.latent_psnr[k]), energy_from_db(b.latent_psnr[k])))
    if not lr.steps:
        lr.text = "no latents saved"
        return lr
    if baseline and pairs:
        sd, _ = rules.stated_sd("video_mse")  # a latent's spread is never measured here: stated, else none
        lr.reading = baseline_reading("latent", "early-step latent error energy", pairs, baseline=baseline,
                                      margin=rules.baseline_margin, alpha=rules.alpha, sigma=sd, df=math.inf)  # fmt: skip
        lr.word = {"not worse": WITHIN, "worse": OUTSIDE}.get(lr.reading.word, lr.reading.word)
        lr.text = f"matched steps {sorted(set(lr.steps.values()))}: {lr.reading.text}"
        return lr
    low = {s: p for s, p in lr.psnr.items() if not p >= rules.latent_min_psnr_db}
    lr.word = OUTSIDE if low else WITHIN
    per = ", ".join(f"seed {s} step {lr.steps[s]}: {fmt_db(p)}" for s, p in lr.psnr.items())
    lr.text = (
        f"early-step latent PSNR against the reference ({per}), absolute bound {rules.latent_min_psnr_db:g} dB "
        f"(no accepted baseline; a floor that differs by round-off is no yardstick): {lr.word}"
    )
    return lr


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
    cand_frames: Sequence[FrameCounts] = (),
    exact_frames: Sequence[FrameCounts] = (),
) -> Verdict:
    """The verdict of one arm from numbers alone (module docstring)."""
    rules = rules or VerdictRules()
    v = Verdict(arm=arm, keys=[c.key for c in cands], measured=len(cands), tolerance=rules.tolerance,
                seeds=sorted({c.seed for c in cands if c.seed is not None}, key=sample_key), floor_runs=len(floors))  # fmt: skip
    if not cands:
        v.word, v.text, v.accuracy = NOT_RUN, "not measured", "not measured"
        return v
    all_seeds = list(dict.fromkeys(c.seed for c in cands))
    cand_of = {c.seed: c for c in cands}
    # Identical is decided before any ratio: bitwise equal output has no error to weigh.
    v.identical_seeds = [s for s in all_seeds if is_identical(cand_of[s])]
    if len(v.identical_seeds) == len(all_seeds):
        v.word = v.decided_by = v.end_to_end_word = IDENTICAL
        n = len(all_seeds)
        v.text = v.accuracy = f"{IDENTICAL} ({n} of {n} seed(s)): output bitwise equal to the reference's"
        v.per_seed = [identical_seed(s) for s in all_seeds]
        v.sentences = [v.text]
        if insitu is not None and insitu.word:  # a shadow measured on the way still speaks
            v.insitu = insitu
            v.sentences.append(f"in-situ: {insitu.text}")
        return v
    seeds = [s for s in all_seeds if s not in v.identical_seeds]
    v.floor_check = check_floor(floors)
    kept = {k for sc in v.floor_check.seeds for k in sc.kept}
    floors_of: dict = {}
    for f in (f for f in floors if f.key in kept):
        floors_of.setdefault(f.seed, []).append(f)
    base_of = {b.seed: b for b in baseline}
    v.per_seed = [_seed_regimes(s, floors_of.get(s, []), rules) for s in seeds]
    regime_of = {sv.seed: sv.regime for sv in v.per_seed}
    for sv in v.per_seed:
        sc = next((sc for sc in v.floor_check.seeds if sc.seed == sv.seed), None)
        sv.floor_left_out = list(sc.left_out) if sc is not None else []
        if sc is not None and sc.invalid:
            v.missing.append(f"seed {sv.seed}: floor invalid ({sc.invalid})")
        elif sv.regime["video"] == "no floor":
            v.missing.append(f"seed {sv.seed}: no noise-floor run")
    parts: list[tuple[str, str, str]] = []  # (word, why, what decided it)
    # The verdict is outside when any modality is: each modality's intervals at alpha / modalities judged.
    judged_modalities = {
        KINDS[k].metric.modality for s in seeds for r in regime_of[s].values() for k in JUDGED_BY.get(r, ())
    }
    alpha = rules.alpha / max(1, len(judged_modalities))
    for kind in ("video_mse", "video_1_ssim", "audio_error", "audio_spectral", "audio_logmel"):
        modality = KINDS[kind].metric.modality
        judged = [s for s in seeds if kind in JUDGED_BY.get(regime_of[s][modality], ())]
        vals = _values(kind, judged or seeds, cand_of, floors_of)
        if not vals:
            continue
        sd, source = rules.stated_sd(kind)
        # a seed set aside as identical still has exact floor runs: they measure the spread too
        spread = _values(kind, [*(judged or seeds), *v.identical_seeds], {}, floors_of)
        r = ratio_reading(kind, KINDS[kind].energy.label, vals, bound=rules.tolerance, alpha=alpha, prior_sd=sd,
                          source=source, spread_from=spread)  # fmt: skip
        if judged:
            v.energy.append(r)
            parts.append((r.word, r.text, kind))
            v.missing += [s.note for s in r.per_seed if s.word == INCOMPLETE]
        else:
            why = {"video": "the video floor is chaotic", "audio": "another audio measure judges"}[modality]
            v.shown.append(f"{r.text.split(':')[0]}: not judged ({why})")
    v.audio_lag = _lag_findings(seeds, cand_of, floors_of)
    if v.audio_lag:
        parts.append((OUTSIDE, "; ".join(v.audio_lag), "lag"))
    chaotic = [s for s in seeds if regime_of[s]["video"] in ("chaotic", "transitional")]
    if chaotic:
        v.latent = _latents(chaotic, cand_of, base_of, rules, rules.accepted_baseline if baseline else None)
        if v.latent.word:
            v.latent.judged = True
            parts.append((v.latent.word, v.latent.text, "latents"))
    left_out = {k for sc in v.floor_check.seeds for k in sc.left_out}
    exact_ok = [e for e in exact_stats if e.key not in left_out]
    st = judge_stats([c for c in cand_stats if c.seed not in v.identical_seeds], exact_ok, rules)
    v.stats, v.stats_word, v.stats_text = st.checks, st.word, st.text
    if st.word:
        parts.append((st.word, st.text, "statistics"))
        v.missing += [c.text for c in st.checks if c.word == INCOMPLETE]
    # Broken frames and the coarse layout, judged in every regime (a mirror fools every statistic).
    judged_cands = [c for c in cands if c.seed in seeds]
    kept_floors = [f for fs in floors_of.values() for f in fs]
    v.structure = judge_structure(judged_cands, kept_floors,
                                  cand_frames=[c for c in cand_frames if c.seed in seeds],
                                  exact_frames=[e for e in exact_frames if e.key not in left_out])  # fmt: skip
    if v.structure.word:
        parts.append((v.structure.word, v.structure.text, "structure"))
    if baseline and rules.accepted_baseline:
        v.baseline = _baseline(v, cand_of, base_of, seeds, rules)
    v.end_to_end_word = overriding_word(combine(w for w, _, _ in parts), missing=bool(v.missing))
    # The in-situ reading is a second reading in every regime: the verdict is outside when it is.
    if insitu is not None and insitu.word:
        v.insitu = insitu
        parts.append((known(insitu.word), insitu.text, "insitu"))
    v.word = overriding_word(combine(w for w, _, _ in parts), missing=bool(v.missing))
    v.decided_by = deciding_part(v, parts)
    top = decisive_reading(v)
    if top is not None and top.ratio is not None:
        v.ratio, v.ratio_ci, v.ratio_metric = top.ratio, top.ratio_ci, top.metric
    elif v.decided_by == "insitu" and v.insitu is not None and (v.insitu.nonfinite or v.insitu.failed):
        v.ratio, v.ratio_ci, v.ratio_metric = math.inf, None, "insitu"  # a call that failed has no ratio
    elif v.decided_by == "insitu" and v.insitu is not None:
        v.ratio, v.ratio_ci, v.ratio_metric = v.insitu.ratio, v.insitu.ratio_ci, "insitu"
    _seed_words(v, rules)
    v.text = v.accuracy = verdict_text(v, rules, parts)
    v.sentences = [r.text for r in v.energy] + v.shown + v.audio_lag
    if v.identical_seeds:
        which = f"{', '.join(map(str, v.identical_seeds))} ({len(v.identical_seeds)} of {len(all_seeds)})"
        rest = "output bitwise equal to the reference's there; the other seeds are judged"
        v.sentences.insert(0, f"identical on seed(s) {which}: {rest}")
    # a candidate far below its floor is a finding about the floor, not praise for the candidate
    v.sentences += v.floor_check.findings + [
        f"{r.label} {ratio_text(r.ratio)} the floor's (upper bound {ratio_value(r.ratio_ci[1])} < {FAR_BELOW:g}): "
        "far below the floor: the floor, not the candidate, is in question (check the floor runs)"
        for r in v.energy
        if r.ratio_ci and 0 < r.ratio_ci[1] < FAR_BELOW
    ]
    said = [
        ("latents: ", v.latent),
        ("in-situ: ", v.insitu),
        ("structure: ", v.structure),
        ("", st),
        ("against the accepted baseline: ", v.baseline),
    ]
    v.sentences += [f"{head}{part.text}" for head, part in said if part is not None and part.text]
    identical = sum(c.identical_frames for c in cands if c.seed in seeds)
    if identical:
        frames = sum(c.frames for c in cands if c.seed in seeds)
        v.sentences.append(f"identical frames: {identical} of {frames}, counted in the pooled MSE (MSE 0)")
    return v


def _baseline(v: Verdict, cand_of, base_of, seeds, rules: VerdictRules) -> RatioReading | None:
    """Non-inferiority against the accepted baseline, on the kind that judges."""
    judged = next((r for r in v.energy if r.metric != "audio_logmel"), None)
    if judged is None:
        return None
    kind = judged.metric
    sigma = judged.log_sd if judged.log_sd is not None else rules.stated_sd(kind)[0]
    df = judged.df if judged.spread.startswith("spread measured") else math.inf
    get = KINDS[kind].get
    pairs = [
        (s, get(cand_of[s]) if s in cand_of else None, get(base_of[s]) if s in base_of else None)
        for s in seeds
    ]
    return baseline_reading(kind, KINDS[kind].energy.label, pairs, baseline=str(rules.accepted_baseline),
                            margin=rules.baseline_margin, alpha=rules.alpha, sigma=sigma, df=df or math.inf)  # fmt: skip


def _seed_words(v: Verdict, rules: VerdictRules) -> None:
    top = decisive_reading(v)
    for sv in v.per_seed:
        mine = [(r, x) for r in v.energy for x in r.per_seed if x.seed == sv.seed]  # one per reading
        others = [("statistics", c.word) for c in v.stats if c.judged and c.seed == sv.seed]
        if any(f"seed {sv.seed}:" in x for x in v.audio_lag):
            others.append(("audio lag", OUTSIDE))
        if v.latent is not None and str(sv.seed) in v.latent.psnr and v.latent.word:
            others.append(("latents", v.latent.word))
        words = [x.word for _, x in mine] + [w for _, w in others]
        # no judged value on this seed: incomplete without a floor run, else nothing decided; without
        # a floor run (none, or its floor invalid) only a part outside says more than incomplete
        sv.word = combine(words) if words else (INCOMPLETE if not sv.floor_runs else INCONCLUSIVE)
        if not sv.floor_runs and sv.word != OUTSIDE:
            sv.word = INCOMPLETE
        # the figure quoted is the one that gives the seed its word, the headline's reading first
        said = sorted((p for p in mine if p[1].ratio is not None),
                      key=lambda p: (p[1].word != sv.word, p[0] is not top, -(p[1].ratio or 0.0)))  # fmt: skip
        ratio = ""
        if said:
            r, x = said[0]
            sv.ratio, sv.ci = x.ratio, x.ratio_ci
            ratio = f"; {r.label} {ratio_text(sv.ratio)}"
            if x.word != sv.word:  # another part gives the word: named
                ratio += "; " + ", ".join(dict.fromkeys(n for n, w in others if w == sv.word))
        regime = ", ".join(f"{k} {x}" for k, x in sv.regime.items())
        left = f", {len(sv.floor_left_out)} left out" if sv.floor_left_out else ""
        sv.text = (
            f"seed {sv.seed}: {regime} (floor {fmt_db(sv.floor_psnr)}, {sv.floor_runs} run(s){left}){ratio}: "
            f"{sv.word}"
        )
    v.per_seed += [identical_seed(s) for s in v.identical_seeds]


def identical_seed(seed) -> SeedVerdict:
    return SeedVerdict(seed=seed, identical=True, word=IDENTICAL, text=f"seed {seed}: {IDENTICAL}")


def overriding_word(
    word: str,
    *,
    missing: bool = False,
    ran: bool = True,
    measured: bool = True,
    attention_ok: bool | None = None,
) -> str:
    """Every override of the parts' word, in one place: no run ok: not run; none measured or ``missing``:
    incomplete (outside stands); attention not served by the requested op: invalid."""
    if not ran:
        return NOT_RUN
    if not measured:
        word = INCOMPLETE
    elif missing:
        word = combine([word, INCOMPLETE])
    return INVALID if attention_ok is False else word


def attention_verdict(runs: list[RunSummary]) -> tuple[bool | None, str]:
    """(all calls served by the requested op, a sentence saying so); None when it cannot be told."""
    judged = [r for r in runs if r.ok]
    if not judged:
        return None, "not judged (no run finished ok)"
    unknown = [r.key for r in judged if r.valid is None]
    problems = [
        f"{r.key}: " + ("; ".join(r.invalid_reasons) or "marked invalid") for r in judged if r.valid is False
    ]
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


def did_it_run(v: Verdict, measured: list[Comparison], runs: list[RunSummary]) -> str:
    """A warning when an arm not on the reference's backend gives its output bit for bit: did it run?"""
    ident = [c for c in measured if c.b.seed in v.identical_seeds]
    if not ident:
        return ""
    ref_type, own = ident[0].a.attn_type, ident[0].b.attn_type
    if own is None or own == ref_type or ident[0].b.perturbation:
        return ""  # the reference's own backend (a shadowed copy, a schedule on its exact steps)
    counted = [r.attn.calls_requested for r in runs if r.ok and r.attn is not None]
    if not counted:
        calls = "no call counts were recorded to tell whether it was reached"
    elif sum(counted) == 0:
        calls = f"the counts show no call served by {own}: it did not run"
    else:
        calls = f"{sum(counted)} call(s) were counted as served by {own}: check that the op computes"
    seeds = ", ".join(str(c.b.seed) for c in ident)
    return (
        f"{own} is not the reference's backend ({ref_type}), yet its output is bitwise the reference's on seed(s) "
        f"{seeds}: its kernel may not have run; {calls}"
    )


def judge(
    arm: str,
    cands: list[Comparison],
    floors: list[Comparison],
    *,
    runs: list[RunSummary] | None = None,
    rules: VerdictRules | None = None,
    baseline: list[Comparison] | None = None,
    insitu: InsituReading | None = None,
) -> Verdict:
    """Verdict for one arm from its comparisons, the floors', the baseline's and its runs."""
    rules = rules or VerdictRules()
    runs = runs if runs is not None else [c.b for c in cands]
    measured = [c for c in cands if c.measured]
    floor_ok = [f for f in floors if f.measured]
    exact = {r.key: r for r in [*(c.a for c in measured), *(f.b for f in floor_ok)] if r.stats is not None}
    v = judge_numbers(
        arm,
        [PairErrors.from_comparison(c) for c in measured],
        [PairErrors.from_comparison(f) for f in floor_ok],
        cand_stats=[stats_sample(c.b) for c in measured if c.b.stats is not None],
        exact_stats=[stats_sample(r) for r in exact.values()],
        rules=rules,
        baseline=[PairErrors.from_comparison(b) for b in baseline or [] if b.measured],
        insitu=insitu,
        cand_frames=[FrameCounts.of(c.b) for c in measured if c.b.stats is not None],
        exact_frames=[FrameCounts.of(r) for r in exact.values()],
    )
    v.role = runs[0].role if runs else "candidate"
    v.keys = [r.key for r in runs if r.repeat == 1] or v.keys
    v.seeds = sorted({r.seed for r in runs if r.seed is not None}, key=sample_key)
    head: list[str] = []
    by_reason: dict[tuple[str, str | None], list[str]] = {}
    for r in (r for r in runs if not r.ok):
        by_reason.setdefault((r.status, r.reason), []).append(r.key)
    for (status, reason), keys in by_reason.items():
        who = keys[0] if len(keys) == 1 else f"{len(keys)} runs ({', '.join(keys)})"
        head.append(f"{who} not measured: status {status}" + (f" ({reason})" if reason else ""))
    for c in cands:
        if c.b.ok and not c.measured:
            head.append(f"{c.b.key}: " + "; ".join(c.notes or ["not measured"]))
    primary_seeds = {r.seed for r in runs if r.repeat == 1 and r.ok}
    unmeasured = sorted((s for s in primary_seeds if s not in {c.b.seed for c in measured}), key=sample_key)
    v.sentences = head + v.sentences
    v.attention_ok, v.attention = attention_verdict(runs)
    v.sentences.append(f"attention: {v.attention}")
    warning = did_it_run(v, measured, runs)
    if warning:
        v.warnings.append(warning)
        v.sentences.insert(0, warning)
    # the verdict once its runs have spoken of themselves: its word overridden, its line said again
    ran = any(r.ok for r in runs)
    word = overriding_word(
        v.word, ran=ran, measured=bool(measured), missing=bool(unmeasured), attention_ok=v.attention_ok
    )
    first = next((r for r in runs if r.reason), None)
    v.text = v.accuracy = settled_text(
        v, word, first=first, measured=bool(measured), unmeasured=unmeasured, head=head
    )
    v.word = word
    attn = {True: "attention valid", False: "attention INVALID", None: "attention not verified"}
    v.summary = f"{v.text}; {attn[v.attention_ok]}"
    return v
