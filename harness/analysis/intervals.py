"""A ratio of error energies with its interval: per seed against the floor of that seed, then
combined over seeds, and the word it supports.

Per seed s, with k_s floor runs (energies f) and the candidate's energy c:

    log r_s = log c - log mean(f),   se_s = sigma * sqrt(1 + 1/k_s)

sigma is the within-seed sd of the log energy of one run, pooled over every seed's floor runs
(df = sum(k_s - 1)); where every seed has one floor run it is the stated assumption
``VerdictRules.floor_log_sd`` (df infinite). The candidate counts as one more draw of that noise.
Combined over S seeds: the geometric mean, log r = mean(log r_s), with

    se^2 = sum(se_s^2) / S^2 + tau^2 / S,   tau^2 = max(0, var(log r_s) - mean(se_s^2))

(the seeds' own spread beyond the floor noise), df by Satterthwaite. Every interval is two-sided
at 1 - alpha (a seed's at 1 - alpha / S: every seed must pass, S decisions). The word:
**outside** when a seed's or the combined lower bound is over the tolerance; **incomplete** when a seed lacks the value (named); **within** when the combined upper
bound is under the tolerance and no seed's ratio is over it (every seed must pass); else
**inconclusive**, with the number of seeds that would decide it at this spread.

``baseline_reading`` sets a candidate against an accepted approximate kernel the same way (both
single runs: se_s = sigma * sqrt(2)), non-inferiority with a margin.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

from pydantic import Field

from harness.number_format import ratio_text
from harness.records import Record

TINY = 1e-300  # an energy of exactly 0 (identical outputs) in a logarithm
MAX_SEEDS_TO_DECIDE = 1000


class SeedValues(Record):
    """What one seed gives one kind of energy: the candidate's and its floor runs'."""

    seed: int | None = None
    candidate: float | None = None
    floors: list[float] = Field(default_factory=list)
    floor_keys: list[str] = Field(default_factory=list)


class SeedRatio(Record):
    seed: int | None = None
    candidate: float | None = None  # the candidate's energy in this seed
    floor: float | None = None  # the mean of the floor runs of this seed
    n_floor: int = 0
    ratio: float | None = None
    ratio_ci: list[float] | None = None
    word: str = ""  # within | outside | inconclusive | incomplete
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


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float | None) -> float:
    """Student's t quantile (the normal's for infinite df); scipy.special: fast in loops."""
    from scipy import special

    return float(special.ndtri(p)) if df is None or math.isinf(df) else float(special.stdtrit(df, p))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T_df| > |t|)."""
    from scipy import special

    if math.isinf(df):
        return float(2 * special.ndtr(-abs(t)))
    return float(2 * special.stdtr(df, -abs(t)))


def pooled_log_sd(seeds: Sequence[SeedValues]) -> tuple[float | None, float]:
    """(sigma, df): the within-seed sd of log floor energies pooled over seeds; (None, 0) when no seed
    has two finite positive floor runs."""
    ss = df = 0.0
    for s in seeds:
        logs = [math.log(f) for f in s.floors if math.isfinite(f) and f > 0]
        if len(logs) >= 2:
            m = sum(logs) / len(logs)
            ss += sum((x - m) ** 2 for x in logs)
            df += len(logs) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0.0)


def _ci(logr: float, se: float, q: float) -> list[float]:
    return [math.exp(logr - q * se), math.exp(logr + q * se)]


def _word(lo: float, hi: float, ratio: float, bound: float) -> str:
    if lo > bound:
        return "outside"
    if hi < bound:
        return "within"
    return "inconclusive" if math.isfinite(ratio) else "outside"


def _seed_ratio(
    s: SeedValues, label: str, sigma: float, q: float, bound: float
) -> tuple[SeedRatio, float | None]:
    """The seed's ratio and word, and its log ratio (None: not usable in the combination)."""
    out = SeedRatio(seed=s.seed, candidate=s.candidate, n_floor=len(s.floors))
    where = f"seed {s.seed}" if s.seed is not None else "the run"
    bad_floor = [k or "a floor run" for f, k in zip(s.floors, s.floor_keys or [""] * len(s.floors),
                                                     strict=True) if not math.isfinite(f)]  # fmt: skip
    if not s.floors:
        out.word, out.note = "incomplete", f"{where}: no floor run has {label}"
        return out, None
    if bad_floor:
        out.word, out.note = "incomplete", f"{where}: {label} of {', '.join(bad_floor)} is not finite"
        return out, None
    out.floor = statistics.fmean(s.floors)
    if s.candidate is None:
        out.word, out.note = "incomplete", f"{where}: the candidate has no {label} (the floor has)"
        return out, None
    if not math.isfinite(s.candidate):
        out.ratio, out.word = math.inf, "outside"
        out.note = f"{where}: the candidate's {label} is {s.candidate} (not finite): fails"
        return out, None
    if out.floor == 0.0:
        if s.candidate == 0.0:
            out.ratio, out.ratio_ci, out.word = 1.0, [1.0, 1.0], "within"
            return out, 0.0
        out.ratio, out.word = math.inf, "outside"
        out.note = f"{where}: every floor run is identical to the reference, the candidate is not"
        return out, None
    logr = math.log(max(s.candidate, TINY)) - math.log(out.floor)
    se = sigma * math.sqrt(1 + 1 / len(s.floors))
    out.ratio, out.ratio_ci = math.exp(logr), _ci(logr, se, q)
    out.word = _word(*out.ratio_ci, out.ratio, bound)
    return out, logr


def ratio_reading(
    metric: str,
    label: str,
    seeds: Sequence[SeedValues],
    *,
    bound: float,
    alpha: float,
    prior_sd: float,
    against: str = "the floor's",
    given_sd: tuple[float, float] | None = None,
) -> RatioReading:
    """The candidate's energy over the floor's, per seed and combined (module docstring).

    ``given_sd``: (sigma, df) measured elsewhere, instead of the spread of ``seeds``' floor values."""
    r = RatioReading(metric=metric, label=label, against=against, bound=bound, alpha=alpha)
    sigma, df_w = given_sd if given_sd is not None else pooled_log_sd(seeds)
    if given_sd is not None:
        r.spread = (
            f"spread of a run: sd {sigma:.3g} of the log energy (from the floor runs, df {df_w:g})"
            if math.isfinite(df_w)
            else f"spread of a run assumed: sd {sigma:.3g} of the log energy"
        )
    elif sigma is None:
        sigma, df_w = prior_sd, math.inf
        r.spread = f"spread assumed: sd {prior_sd:g} of the log energy of a run (one floor run per seed)"
    else:
        runs = sum(len(s.floors) for s in seeds)
        r.spread = f"spread measured: sd {sigma:.3g} of the log energy over {runs} floor runs (df {df_w:g})"
    r.log_sd = sigma
    # Every seed must pass: S per-seed decisions, so each at alpha / S (Bonferroni).
    q_seed = t_quantile(1 - alpha / (2 * max(1, len(seeds))), df_w)
    logs: list[float] = []
    ses: list[float] = []
    for s in seeds:
        sr, logr = _seed_ratio(s, label, sigma, q_seed, bound)
        r.per_seed.append(sr)
        if logr is not None:
            logs.append(logr)
            ses.append(sigma * math.sqrt(1 + 1 / len(s.floors)))
    words = [s.word for s in r.per_seed]
    if logs:
        n = len(logs)
        a = sum(se * se for se in ses) / n**2
        mean = sum(logs) / n
        var = sum((x - mean) ** 2 for x in logs) / (n - 1) if n > 1 else 0.0
        tau2 = max(0.0, var - sum(se * se for se in ses) / n) if n > 1 else 0.0
        b = tau2 / n
        df = (
            df_w
            if b == 0
            else (a + b) ** 2 / ((a * a / df_w if math.isfinite(df_w) else 0.0) + b * b / (n - 1))
        )
        se = math.sqrt(a + b)
        q = t_quantile(1 - alpha / 2, df)
        logr = statistics.fmean(logs)
        r.df, r.ratio, r.ratio_ci = df, math.exp(logr), _ci(logr, se, q)
        combined = _word(*r.ratio_ci, r.ratio, bound)
        gap = abs(logr - math.log(bound))
        if combined == "inconclusive" and gap > 0:
            need = math.ceil(n * (q * se / gap) ** 2)
            r.seeds_to_decide = need if need <= MAX_SEEDS_TO_DECIDE else None
    else:
        combined = ""
    if "outside" in words or combined == "outside":
        r.word = "outside"
        if r.ratio is None or not math.isfinite(r.ratio or 0.0):
            r.ratio = max((s.ratio for s in r.per_seed if s.ratio is not None), default=None)
    elif "incomplete" in words or not combined:
        r.word = "incomplete"
    elif combined == "within" and all((s.ratio or 0.0) <= bound for s in r.per_seed):
        r.word = "within"
    else:
        r.word = "inconclusive"
    r.text = reading_text(r, alpha)
    return r


def ci_text(ci: list[float] | None, alpha: float = 0.05) -> str:
    if not ci:
        return "no interval"
    return f"{100 * (1 - alpha):.10g}% CI {ci[0]:.3g}-{ci[1]:.3g}"


def reading_text(r: RatioReading, alpha: float = 0.05) -> str:
    """'video MSE 1.61x the floor's (95% CI 1.45-1.79, 3 seeds), tolerance 2x: within'."""
    seeds = len(r.per_seed)
    bound = "tolerance" if r.against == "the floor's" else "margin"
    head = f"{r.label} {ratio_text(r.ratio)} {r.against}"
    if r.ratio_ci:
        head += f" ({ci_text(r.ratio_ci, alpha)}, {seeds} seed(s))"
    head += f", {bound} {r.bound:g}x: {r.word}"
    bits = [head]
    if r.word == "inconclusive":
        bits.append(
            f"about {r.seeds_to_decide} seed(s) would decide it at this spread"
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
    sigma: float,
    df: float,
) -> RatioReading:
    """Non-inferiority against an accepted approximate kernel: (seed, candidate, baseline) energies
    per seed, sigma the run-to-run spread the floor measured (df; inf when assumed). The candidate
    is "not worse" when the interval of its ratio lies under ``margin``, "worse" when over it."""
    seeds = [
        SeedValues(seed=s, candidate=c, floors=[b] if b is not None else [], floor_keys=[baseline])
        for s, c, b in pairs
    ]
    r = ratio_reading(
        metric, label, seeds, bound=margin, alpha=alpha, prior_sd=sigma, against=f"{baseline}'s",
        given_sd=(sigma, df),
    )  # fmt: skip
    r.word = BASELINE_WORDS.get(r.word, r.word)
    for sr in r.per_seed:
        sr.word = BASELINE_WORDS.get(sr.word, sr.word)
        sr.note = sr.note.replace("no floor run has", f"{baseline} has no")
    r.text = reading_text(r, alpha)
    return r


BASELINE_WORDS = {"within": "not worse", "outside": "worse"}
