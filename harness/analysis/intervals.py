"""A ratio of error energies with its interval, per seed against that seed's floor, then over seeds, and its
word (docs/verdicts.md): per seed se_s = sigma sqrt(1 + 1/k_s) on log r_s, sigma the floor runs' sd of log
energy pooled over seeds (else stated, else the seeds' spread alone); over S seeds the geometric mean,
se^2 = sum(se_s^2) / S^2 + tau^2 / S, df by Satterthwaite; a seed's interval at alpha / S."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import Field

from harness.number_format import ci_text, count_text, ratio_text
from harness.records import Record
from harness.rule import INCOMPLETE, INCONCLUSIVE, OUTSIDE, WITHIN, combine, pooled_sd, t_quantile, word
from harness.run_keys import Sample
from harness.safe_math import safe_exp, scaled_mean_sd

MAX_SEEDS_TO_DECIDE = 1000


class SeedValues(Record):
    """What one seed gives one kind of energy: the candidate's and its floor runs'."""

    seed: Sample | None = None
    candidate: float | None = None
    floors: list[float] = Field(default_factory=list)
    floor_keys: list[str] = Field(default_factory=list)


class SeedRatio(Record):
    seed: Sample | None = None
    candidate: float | None = None  # the candidate's energy in this seed
    floor: float | None = None  # the mean of the floor runs of this seed
    n_floor: int = 0
    ratio: float | None = None
    ratio_ci: list[float] | None = None
    word: str = ""  # a word of harness.rule.SEVERITY
    note: str = ""


class RatioReading(Record):
    """One kind of error energy against its reference (the floor, or an accepted baseline)."""

    metric: str
    label: str
    against: str = "the floor's"
    bound: float = 2.0  # the tolerance (or the non-inferiority margin)
    alpha: float = 0.05  # the level of the combined interval (a seed's: alpha / seeds)
    ratio: float | None = None  # combined over seeds (geometric mean)
    ratio_ci: list[float] | None = None
    word: str = ""
    log_sd: float | None = None  # sigma
    df: float | None = None  # of the combined interval (inf: assumed sigma)
    spread: str = ""  # where sigma comes from
    per_seed: list[SeedRatio] = Field(default_factory=list)
    seeds_to_decide: int | None = None
    text: str = ""


def _ci(logr: float, se: float, q: float) -> list[float]:
    return [safe_exp(logr - q * se), safe_exp(logr + q * se)]


def _word(lo: float, hi: float, ratio: float, bound: float) -> str:
    """``word`` of the interval; an infinite ratio whose interval is undefined (NaN ends) is outside."""
    w = word(lo, hi, bound)
    return OUTSIDE if w == INCONCLUSIVE and not math.isfinite(ratio) else w


def _seed_ratio(
    s: SeedValues, label: str, sigma: float | None, q: float, bound: float
) -> tuple[SeedRatio, float | None]:
    """The seed's ratio and word (no interval without ``sigma``), and its log ratio (None: not combined)."""
    out = SeedRatio(seed=s.seed, candidate=s.candidate, n_floor=len(s.floors))
    where = f"seed {s.seed}" if s.seed is not None else "the run"
    bad_floor = [k or "a floor run" for f, k in zip(s.floors, s.floor_keys or [""] * len(s.floors),
                                                     strict=True) if not math.isfinite(f)]  # fmt: skip
    if not s.floors or bad_floor:
        why = f"{label} of {', '.join(bad_floor)} is not finite" if bad_floor else f"no floor run has {label}"
        out.word, out.note = INCOMPLETE, f"{where}: {why}"
        return out, None
    out.floor = scaled_mean_sd(s.floors)[0]
    if s.candidate is None:
        out.word, out.note = INCOMPLETE, f"{where}: the candidate has no {label} (the floor has)"
        return out, None
    if not math.isfinite(s.candidate):
        out.ratio, out.word = math.inf, OUTSIDE
        out.note = f"{where}: the candidate's {label} is {s.candidate} (not finite): fails"
        return out, None
    if out.floor <= 0.0:  # no yardstick: analysis.verdict_model.check_floor names such floor runs first
        out.word = INCOMPLETE
        out.note = f"{where}: every floor run has {label} 0 (identical to the reference): no floor"
        return out, None
    if s.candidate <= 0.0:  # identical in this measure: ratio 0, and no logarithm of it
        out.ratio, out.ratio_ci, out.word = 0.0, [0.0, 0.0], WITHIN
        out.note = f"{where}: the candidate's {label} is 0 (identical to the reference in this measure)"
        return out, None
    logr = math.log(s.candidate) - math.log(out.floor)
    out.ratio = safe_exp(logr)
    if sigma is None:  # no interval: nothing decided
        out.word = INCONCLUSIVE
        return out, logr
    se = sigma * math.sqrt(1 + 1 / len(s.floors))
    out.ratio_ci = _ci(logr, se, q)
    out.word = _word(*out.ratio_ci, out.ratio, bound)
    return out, logr


def _spread(
    seeds: Sequence[SeedValues], prior_sd: float | None, given_sd: tuple[float, float] | None, source: str
) -> tuple[float | None, float, str]:
    """(sigma, df, its words): given, else measured from the floor runs, else stated, else None."""
    if given_sd is not None:
        sigma, df = given_sd
        if math.isfinite(df):
            text = f"spread of a run: sd {sigma:.3g} of the log energy (from the floor runs, df {df:g})"
            return sigma, df, text
        return sigma, df, f"spread of a run stated: sd {sigma:.3g} of the log energy{source}"
    sigma, df = pooled_sd([[math.log(f) for f in s.floors if math.isfinite(f) and f > 0] for s in seeds])
    runs = sum(len(s.floors) for s in seeds)
    if sigma:
        text = f"spread measured: sd {sigma:.3g} of the log energy over {runs} floor runs (df {df:g})"
        return sigma, df, text
    # equal floor runs measure no spread: a zero would shrink every interval to a point
    why = f"{runs} floor runs agree exactly (sd 0): " if sigma == 0 else "one floor run per seed: "
    if prior_sd is not None:
        text = f"spread of a run stated by the scenario: sd {prior_sd:g} of the log energy{source}"
        return prior_sd, math.inf, (why if sigma == 0 else "") + text
    return None, 0.0, f"{why}the spread of a run is not measured (and the scenario states none)"


def _combine_seeds(
    r: RatioReading, logs: list[float], ses: list[float] | None, df_w: float, alpha: float, bound: float
) -> str:
    """The combined ratio, interval and word (``ses`` None: from the seeds' spread alone, df S - 1)."""
    n = len(logs)
    mean = statistics.fmean(logs)
    var = sum((x - mean) ** 2 for x in logs) / (n - 1) if n > 1 else 0.0
    r.ratio = safe_exp(mean)
    if ses is None:
        if n < 2 or not math.isfinite(var) or var == 0:  # seeds that agree exactly measure no spread
            return INCONCLUSIVE
        se, df = math.sqrt(var / n), float(n - 1)
    else:
        a = sum(x * x for x in ses) / n**2
        tau2 = max(0.0, var - sum(x * x for x in ses) / n) if n > 1 else 0.0
        b = tau2 / n
        den = (a * a / df_w if math.isfinite(df_w) else 0.0) + (b * b / (n - 1) if n > 1 else 0.0)
        df = df_w if b == 0 or den == 0 else (a + b) ** 2 / den
        se = math.sqrt(a + b)
    q = t_quantile(1 - alpha / 2, df)
    r.df, r.ratio_ci = df, _ci(mean, se, q)
    combined = _word(*r.ratio_ci, r.ratio, bound)
    gap = abs(mean - math.log(bound))
    if combined == INCONCLUSIVE and gap > 0 and math.isfinite(se):
        need = n * (q * se / gap) ** 2
        r.seeds_to_decide = math.ceil(need) if need <= MAX_SEEDS_TO_DECIDE else None
    return combined


def ratio_reading(
    metric: str,
    label: str,
    seeds: Sequence[SeedValues],
    *,
    bound: float,
    alpha: float,
    prior_sd: float | None,
    against: str = "the floor's",
    given_sd: tuple[float, float] | None = None,
    source: str = "",
    spread_from: Sequence[SeedValues] = (),
) -> RatioReading:
    """The candidate's energy over the floor's, per seed and combined (module docstring); the spread from
    ``spread_from``'s floor runs where given (seeds set aside still measure it)."""
    r = RatioReading(metric=metric, label=label, against=against, bound=bound, alpha=alpha)
    source = f" ({source})" if source else ""
    sigma, df_w, r.spread = _spread(spread_from or seeds, prior_sd, given_sd, source)
    r.log_sd = sigma
    # Every seed must pass: S per-seed decisions, so each at alpha / S (Bonferroni).
    q_seed = t_quantile(1 - alpha / (2 * max(1, len(seeds))), df_w) if sigma is not None else math.nan
    logs: list[float] = []
    ses: list[float] = []
    for s in seeds:
        sr, logr = _seed_ratio(s, label, sigma, q_seed, bound)
        r.per_seed.append(sr)
        if logr is not None:
            logs.append(logr)
            ses.append(math.nan if sigma is None else sigma * math.sqrt(1 + 1 / len(s.floors)))
    if logs:
        combined = _combine_seeds(r, logs, None if sigma is None else ses, df_w, alpha, bound)
    elif r.per_seed and all(s.ratio == 0.0 for s in r.per_seed):  # identical in this measure on every seed
        r.ratio, r.ratio_ci, combined = 0.0, [0.0, 0.0], WITHIN
    else:
        combined = ""
    # A seed's own interval may decide nothing while the seeds together decide; its ratio may not
    # exceed the bound (every seed must pass), and a seed outside or incomplete speaks for itself.
    words = [s.word for s in r.per_seed]
    r.word = combine([*(w for w in words if w in (OUTSIDE, INCOMPLETE)), combined or INCOMPLETE])
    if r.word == WITHIN and any((s.ratio or 0.0) > bound for s in r.per_seed):
        r.word = INCONCLUSIVE
    if r.word == OUTSIDE and (r.ratio is None or not math.isfinite(r.ratio or 0.0)):
        r.ratio = max((s.ratio for s in r.per_seed if s.ratio is not None), default=None)
    r.text = reading_text(r, alpha)
    return r


def reading_text(r: RatioReading, alpha: float = 0.05) -> str:
    """'video MSE 1.61x the floor's (95% CI 1.45-1.79, 3 seeds), tolerance 2x: within'."""
    seeds = len(r.per_seed)
    bound = "tolerance" if r.against == "the floor's" else "margin"
    head = f"{r.label} {ratio_text(r.ratio)} {r.against}"
    if r.ratio_ci:
        head += f" ({ci_text(*r.ratio_ci, alpha)}, {seeds} seed(s))"
    head += f", {bound} {r.bound:g}x: {r.word}"
    bits = [head]
    if r.word == INCONCLUSIVE and r.ratio_ci is None:
        bits.append(
            "no interval: with one floor run per seed and one seed, the spread is unknown; run two or more "
            "floor runs per seed, or state verdict.floor_log_sd with its source"
            if "agree exactly" not in r.spread
            else "no interval: the spread of a run is unknown (see below)"
        )
    elif r.word == INCONCLUSIVE:
        bits.append(
            f"{count_text(r.seeds_to_decide)} seeds would decide it at this spread"
            if r.seeds_to_decide
            else "the ratio sits at the bound: no practical number of seeds decides it"
        )
    if seeds > 1:
        bits.append("per seed " + ", ".join(f"{s.seed}: {ratio_text(s.ratio)} {s.word}" for s in r.per_seed))
    bits += [s.note for s in r.per_seed if s.note]
    if r.spread:
        bits.append(r.spread)
    return "; ".join(bits)


def baseline_reading(
    metric: str,
    label: str,
    pairs: Sequence[tuple[int | None, float | None, float | None]],
    *,
    baseline: str,
    margin: float,
    alpha: float,
    sigma: float | None,
    df: float,
) -> RatioReading:
    """Non-inferiority against an accepted kernel from (seed, candidate, baseline) energies."""
    seeds = [
        SeedValues(seed=s, candidate=c, floors=[b] if b is not None else [], floor_keys=[baseline])
        for s, c, b in pairs
    ]
    r = ratio_reading(
        metric, label, seeds, bound=margin, alpha=alpha, prior_sd=None, against=f"{baseline}'s",
        given_sd=None if sigma is None else (sigma, df),
    )  # fmt: skip
    r.word = BASELINE_WORDS.get(r.word, r.word)
    for sr in r.per_seed:
        sr.word = BASELINE_WORDS.get(sr.word, sr.word)
        sr.note = sr.note.replace("no floor run has", f"{baseline} has no")
    r.text = reading_text(r, alpha)
    return r


BASELINE_WORDS = {WITHIN: "not worse", OUTSIDE: "worse"}
