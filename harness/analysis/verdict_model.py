"""The records of a verdict (the words, the in-situ and latent readings a verdict weighs, one seed's
verdict and an arm's; ``analysis.verdict`` judges), the floor checked before it judges (each floor run
against the others: docs/verdicts.md) and the one line a reviewer reads, led by the part that decides."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import Field

from harness import rule
from harness.analysis.energy import KINDS, PairErrors, is_identical
from harness.analysis.intervals import RatioReading
from harness.analysis.stat_rule import StatCheck
from harness.analysis.structure import StructureReading
from harness.compare.summary import RunSummary
from harness.number_format import ci_text, count_text, fmt_db, range_text, ratio_text
from harness.records import Record
from harness.rule import IDENTICAL, INCOMPLETE, INCONCLUSIVE, INVALID, NOT_RUN, OUTSIDE, WITHIN, pooled_sd
from harness.run_keys import Sample
from harness.safe_math import safe_exp
from harness.scenario.verdict import VerdictRules

OUTLIER_FACTOR = 5.0  # a floor run within this factor of the others is never left out
OUTLIER_Z = 4.0  # nor within this many sds of the run-to-run spread
# The kinds a floor run is checked by: its video. Exact runs' audio energies spread over two orders of
# magnitude on the builtin pipeline (sd 1.3 of the log), so three runs cannot tell an outlier there:
# with audio checked too, 57 % of intact builtin floors (3 seeds x 3 runs) lost a run; by video, none.
CHECKED_KINDS = ("video_mse", "video_1_ssim")


class SeedFloorCheck(Record):
    seed: Sample | None = None
    kept: list[str] = Field(default_factory=list)  # floor run keys that judge
    left_out: dict[str, str] = Field(default_factory=dict)  # key -> why
    invalid: str = ""  # why the seed has no usable floor ("" when it has one)
    checked: bool = False  # False: fewer than two floor runs, nothing to check against


class FloorCheck(Record):
    seeds: list[SeedFloorCheck] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)  # one line per run left out or seed invalid


def _logs(runs: Sequence[PairErrors], kind: str) -> dict[str, float]:
    get = KINDS[kind].get
    return {r.key: math.log(x) for r in runs if (x := get(r)) is not None and math.isfinite(x) and x > 0}


def _worst(seed_runs: list[PairErrors], rest: dict, kind: str) -> tuple[str, float, float] | None:
    """(key, log factor, log margin) of the run furthest outside the others' spread, or None."""
    logs = _logs(seed_runs, kind)
    if len(logs) < 2:
        return None
    arm = {r.key: r.arm or r.key for r in seed_runs}
    worst = None
    for key, x in logs.items():
        others = [v for k, v in logs.items() if k != key]
        # other seeds lend the spread of the other arms only: an arm wrong on every seed lends none
        groups = [
            list(_logs([r for r in rs if (r.arm or r.key) != arm[key]], kind).values())
            for rs in rest.values()
        ]
        sigma = pooled_sd(groups if len(others) == 1 else [others, *groups])[0]
        d = x - statistics.fmean(others)
        margin = math.log(OUTLIER_FACTOR)
        margin = max(margin, OUTLIER_Z * sigma * math.sqrt(1 + 1 / len(others))) if sigma else margin
        # ties go to the larger key, so the order of the runs never matters
        if abs(d) > margin and (
            worst is None or (abs(d) / margin, key) > (abs(worst[1]) / worst[2], worst[0])
        ):
            worst = (key, d, margin)
    return worst


def _twin(run: PairErrors, seen: Sequence[PairErrors]) -> PairErrors | None:
    """A run whose output is bitwise ``run``'s: by digest, else (numbers alone) every value equal."""
    for o in seen:
        by_digest = o.digest and run.digest
        if o.digest == run.digest if by_digest else bool(o.values) and o.values == run.values:
            return o
    return None


def check_floor(floors: Sequence[PairErrors]) -> FloorCheck:
    """Every seed's floor runs (each against its seed's reference) checked (module docstring)."""
    by_seed: dict = {}
    for f in floors:
        by_seed.setdefault(f.seed, []).append(f)
    out = FloorCheck()
    kept: dict = {}
    for seed, runs in by_seed.items():
        sc = SeedFloorCheck(seed=seed, checked=len(runs) >= 2)
        seen: list[PairErrors] = []
        for r in sorted(runs, key=lambda r: r.key):
            if is_identical(r):
                sc.left_out[r.key] = "identical to the reference (no perturbation)"
            elif (twin := _twin(r, seen)) is not None:
                sc.left_out[r.key] = f"bitwise equal to floor run {twin.key}: one sample, counted once"
            else:
                seen.append(r)
        kept[seed] = [r for r in runs if r.key not in sc.left_out]
        out.seeds.append(sc)
    before = dict(kept)  # other seeds lend their spread as found, so the order of seeds never matters
    for sc in out.seeds:  # leave one out, the worst first, until every run is within the others' spread
        seed = sc.seed
        where = f"seed {seed}" if seed is not None else "the floor"
        rest = {s: rs for s, rs in before.items() if s != seed}
        while len(kept[seed]) >= 2 and not sc.invalid:
            found = [(k, w) for k in CHECKED_KINDS if (w := _worst(kept[seed], rest, k)) is not None]
            if not found:
                break
            # the run furthest outside its margin, in any kind (a noisy kind's big factor is no evidence)
            kind, (key, d, margin) = max(found, key=lambda t: (abs(t[1][1]) / t[1][2], t[1][0], t[0]))
            label, factor = KINDS[kind].energy.label, ratio_text(safe_exp(d))
            if len(kept[seed]) == 2:
                a, b = (r.key for r in kept[seed])
                sc.invalid = (
                    f"its two floor runs ({a}, {b}) disagree: {label} {ratio_text(safe_exp(abs(d)))} apart "
                    f"(margin {ratio_text(safe_exp(margin))}): which one is wrong cannot be told"
                )
                break
            sc.left_out[key] = (
                f"{label} {factor} the other floor runs' of {where} (margin {ratio_text(safe_exp(margin))}): "
                "not exact noise (another kernel, another seed?)"
            )
            kept[seed] = [r for r in kept[seed] if r.key != key]
        if not kept[seed] and not sc.invalid:
            sc.invalid = "every floor run was left out"
        sc.kept = [] if sc.invalid else [r.key for r in kept[seed]]
        out.findings += [f"floor run {k} left out: {why}" for k, why in sc.left_out.items()]
        if sc.invalid:
            out.findings.append(f"{where}: floor invalid: {sc.invalid}")
    return out


class InsituReading(Record):
    """A candidate's in-situ attention reading (measured inside its own run, against exact attention
    on the same inputs): what a chaotic regime rests on where it exists. Extra fields are ignored."""

    word: str = ""  # a word of harness.rule.SEVERITY
    ratio: float | None = None  # to the exact floor's in-situ error
    ratio_ci: list[float] | None = None
    text: str = ""
    decided_by: str = ""  # the call kind that decides, or "non-finite output" / "failed calls"
    nonfinite: int = 0  # calls whose output held NaN or Inf (the reading is then outside)
    failed: int = 0  # calls whose shadow raised (not a refusal)


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
    seed: Sample | None = None
    regime: dict[str, str] = Field(default_factory=dict)  # video, audio
    floor_psnr: float | None = None
    floor_audio_corr: float | None = None
    floor_runs: int = 0
    floor_left_out: list[str] = Field(default_factory=list)  # floor runs of the seed that do not judge
    identical: bool = False  # the candidate's output is bitwise the reference's on this seed
    ratio: float | None = None  # the decisive reading's ratio on this seed
    ci: list[float] | None = None
    word: str = ""
    text: str = ""


class Verdict(Record):
    arm: str
    role: str = "candidate"
    keys: list[str] = Field(default_factory=list)
    seeds: list[Sample] = Field(default_factory=list)
    measured: int = 0  # runs with accuracy metrics
    tolerance: float = 2.0
    word: str = NOT_RUN  # one of harness.rule.WORDS
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
    structure: StructureReading | None = None  # broken frames and the coarse layout (mirror)
    stats: list[StatCheck] = Field(default_factory=list)
    stats_word: str = ""
    stats_text: str = ""
    baseline: RatioReading | None = None  # non-inferiority against the accepted baseline
    missing: list[str] = Field(default_factory=list)  # what made it incomplete
    floor_runs: int = 0
    floor_check: FloorCheck | None = None  # floor runs left out, seeds whose floor is invalid
    identical_seeds: list[Sample | None] = Field(default_factory=list)  # bitwise equal to the reference
    decided_by: str = ""  # the part whose word is the verdict's: an energy kind, insitu, lag, ...
    end_to_end_word: str = ""  # the word of the decoded output alone (every part but in situ)
    warnings: list[str] = Field(default_factory=list)  # e.g. an approximate kernel's output identical
    attention_ok: bool | None = None
    attention: str = ""
    sentences: list[str] = Field(default_factory=list)
    accuracy: str = ""  # the judgement alone (no attention)
    summary: str = ""  # accuracy; attention

    @property
    def equivalent(self) -> bool:
        """Every judged part within (the only word that supports "equivalent at this tolerance")."""
        return self.word == WITHIN


def _short(r: RatioReading) -> str:
    ci = f" ({range_text(*r.ratio_ci)})" if r.ratio_ci else ""
    return f"{r.label} {ratio_text(r.ratio)}{ci}"


def clearest(readings: Sequence[RatioReading], w: str) -> RatioReading:
    """The reading that gives ``w`` furthest from its bound (outside: the highest lower end of its deciding
    interval; within: the lowest upper end), a value that is not finite first; else the largest ratio."""

    def margin(r: RatioReading) -> tuple[int, float]:
        ratio, ci, _, _ = deciding_interval(r, w)
        if ratio is None or not math.isfinite(ratio):
            return (2, 0.0) if w == OUTSIDE else (0, math.inf)
        if ci is None or w not in (OUTSIDE, WITHIN):
            return 0, ratio
        return 1, (ci[0] / r.bound if w == OUTSIDE else r.bound / ci[1] if ci[1] > 0 else math.inf)

    return max(readings, key=margin)


def agrees(ci: Sequence[float] | None, bound: float, w: str) -> bool:
    """The interval, read against ``bound`` by the rule, gives ``w``."""
    return ci is not None and rule.word(ci[0], ci[1], bound) == w


def agreeing(readings: Sequence[RatioReading], w: str) -> list[RatioReading]:
    """The readings whose combined interval gives ``w``, else those with a seed's that does, else all:
    the headline quotes an interval that gives its word where one does."""
    return (
        [r for r in readings if agrees(r.ratio_ci, r.bound, w)]
        or [r for r in readings if any(agrees(s.ratio_ci, r.bound, w) for s in r.per_seed)]
        or list(readings)
    )


def deciding_interval(r: RatioReading, w: str) -> tuple[float | None, list[float] | None, float, str]:
    """(ratio, interval, its alpha, what) that give ``w`` by the rule: the seeds' combined interval, else
    the seed's own (at alpha / seeds) most clearly so ("seed 42's video MSE"), else no interval."""
    seeds = [s for s in r.per_seed if s.ratio is not None and agrees(s.ratio_ci, r.bound, w)]
    if agrees(r.ratio_ci, r.bound, w) or not seeds:
        return r.ratio, r.ratio_ci if agrees(r.ratio_ci, r.bound, w) else None, r.alpha, r.label
    s = max(seeds, key=lambda s: (s.ratio_ci[0], s.ratio))
    return s.ratio, s.ratio_ci, r.alpha / len(r.per_seed), f"seed {s.seed}'s {r.label}"


def deciding_part(v: Verdict, parts: Sequence[tuple[str, str, str]]) -> str:
    """The part whose word is the verdict's: the energy reading that gives it most clearly, then in situ, the rest."""
    with_word = [src for w, _, src in parts if w == v.word]
    energy = [r for r in v.energy if r.word == v.word]
    if energy:
        return clearest(agreeing(energy, v.word), v.word).metric
    ranked = [src for src in ("insitu", "structure", "lag", "statistics", "latents") if src in with_word]
    return (ranked or with_word or [""])[0]


def decisive_reading(v: Verdict) -> RatioReading | None:
    """The error-energy reading that decides the verdict; None when another part decides."""
    if v.decided_by and v.decided_by not in KINDS:
        return None
    named = [r for r in v.energy if r.metric == v.decided_by]
    decisive = named or agreeing([r for r in v.energy if r.word == v.word], v.word) or list(v.energy)
    return clearest(decisive, v.word) if decisive else None


def verdict_text(v: Verdict, rules: VerdictRules, parts: Sequence[tuple[str, str, str]] = ()) -> str:
    """The one line: the word, the decisive evidence with its interval, the rest briefly."""
    bits: list[str] = []
    if v.identical_seeds:
        bits.append(f"{IDENTICAL} on seed(s) {', '.join(map(str, v.identical_seeds))}")
    top = decisive_reading(v)
    lead = next((text for w, text, src in parts if src == v.decided_by and src not in KINDS), "")
    insitu_bit = ""
    if v.insitu is not None:
        insitu_bit = f"in-situ: {v.insitu.text or v.insitu.word} (end to end: {v.end_to_end_word})"
    if v.decided_by == "insitu":  # the part that decides comes first
        bits.append(insitu_bit)
    elif lead:
        bits.append(lead)
    if top is not None:
        interval = ci_text(*top.ratio_ci, top.alpha) if top.ratio_ci else "no interval"
        # the one seed judged (the others identical, set aside) decides alone: it is named
        one = f"seed {top.per_seed[0].seed}'s " if len(top.per_seed) == 1 and len(v.seeds) > 1 else ""
        head = f"error energy {ratio_text(top.ratio)} the floor's ({interval}; {one}{top.label}"
        ratio, ci, alpha, what = deciding_interval(top, v.word)
        if what != top.label:  # one seed's own interval decides: it leads, the seeds combined follow
            head = f"error energy {ratio_text(ratio)} the floor's ({ci_text(*ci, alpha)}; {what}; "
            head += f"{len(v.seeds) or 1} seed(s) combined {ratio_text(top.ratio)}, {interval}"
        others = [_short(r) for r in v.energy if r is not top]
        head += ("; " + ", ".join(others) if others else "") + f"), tolerance {rules.tolerance:g}x"
        head += f", {len(v.seeds) or 1} seed(s)"
        if top.word == INCONCLUSIVE and top.ratio_ci is None:
            head += ": no interval (one floor run per seed, no stated spread)"
        elif top.word == INCONCLUSIVE:
            head += (
                f": {count_text(top.seeds_to_decide)} seeds would decide it" if top.seeds_to_decide
                else ": no practical number of seeds decides it"
            )  # fmt: skip
        bits.append(head)
    elif v.energy:
        bits.append("end to end: " + ", ".join(f"{_short(r)} {r.word}" for r in v.energy))
    invalid = [sc for sc in v.floor_check.seeds if sc.invalid]  # checked before the verdict judges
    left = [k for sc in v.floor_check.seeds for k in sc.left_out]
    bits += [f"floor run(s) left out: {', '.join(left)}"] if left else []
    bits += ["; ".join(f"seed {sc.seed}: floor invalid" for sc in invalid)] if invalid else []
    chaotic = [sv for sv in v.per_seed if sv.regime.get("video") == "chaotic"]
    if chaotic:
        psnrs = ", ".join(fmt_db(sv.floor_psnr) for sv in chaotic)
        low = rules.chaotic_below_db - rules.chaotic_band_db / 2
        bits.append(f"pixel metrics uninformative (floor {psnrs} < {low:g} dB)")
    if insitu_bit and v.decided_by != "insitu":
        bits.append(insitu_bit)
    if v.latent is not None and v.latent.judged:
        bits.append(f"latents {v.latent.word}")
    elif chaotic and v.insitu is None:
        bits.append("no in-situ reading or latents: the video rests on the statistics")
    bits += [x for x in v.audio_lag if x not in lead]
    if v.structure is not None and v.structure.word in (OUTSIDE, INCONCLUSIVE) and v.structure.text != lead:
        bits.append(v.structure.text)
    bits += [v.stats_text] if v.stats_text and v.stats_text != lead else []
    if v.baseline is not None:
        b = v.baseline
        ci = f" ({ci_text(*b.ratio_ci, rules.alpha)})" if b.ratio_ci else ""
        bits.append(f"error energy {ratio_text(b.ratio)} {b.against}{ci}, margin {b.bound:g}x: {b.word}")
    bits += ["missing: " + "; ".join(dict.fromkeys(v.missing))] if v.missing else []
    if v.word == WITHIN:  # the only word whose intervals support the claim
        bits.append(f"equivalent at {rules.tolerance:g}x: every interval under the tolerance")
    return f"{v.word}: " + "; ".join(bits) if bits else v.word


def settled_text(
    v: Verdict,
    word: str,
    *,
    first: RunSummary | None,
    measured: bool,
    unmeasured: Sequence,
    head: Sequence[str],
) -> str:
    """The verdict's line once its runs have spoken: ``word`` the word they leave it (``verdict.judge``)."""
    if word == NOT_RUN:
        return NOT_RUN + (f" ({first.status}: {first.reason})" if first else "")
    text = v.text
    if not measured:
        text = f"{INCOMPLETE}: no run of the arm could be measured; " + "; ".join(head)
    elif unmeasured and v.word != OUTSIDE:
        seeds = ", ".join(map(str, unmeasured))
        text = f"{INCOMPLETE}: seed(s) {seeds} not measured; " + text.split(": ", 1)[-1]
    if word == INVALID:
        return f"{INVALID}: {v.attention}; as measured: {text}"
    return text + ("; WARNING: " + "; ".join(v.warnings) if v.warnings else "")
