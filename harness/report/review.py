"""The review at a glance: per candidate its verdict word, its error ratio to the noise floor and its
speed-up, each with an interval; the points of the speed-against-accuracy figure.

The page's badges, its figure and the GitHub job summary read these ``Reading`` records and nothing
else: every verdict's ``word``, the reading that decides it (``decided_by``: in situ where it does,
else the error-energy ratio to the floor named by ``ratio_metric``, combined over seeds, with its
interval), its second reading (the end-to-end word and ratio beside the in-situ one, in every regime
where an in-situ reading exists), the seeds bitwise identical to the reference and the warnings; and
every speed test's ``speedup``, ``speedup_ci`` and ``word`` (``analysis.verdict``,
``compare.significance``). "identical" (output bitwise the reference's on every seed) is a word of its
own, shown first and alone: no ratio.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import Any

from harness.analysis.model import ReportResults, SpeedTest, Verdict
from harness.compare.significance import fmt_speedup_value
from harness.emulator_provenance import Provenance, provenance_of
from harness.metrics import energy_metrics, judged_energies
from harness.number_format import NA, fmt_speedup, range_text, ratio_text
from harness.rule import WORDS

WORD_COLOURS = {"identical": "#1565c0", "within": "#2e7d32", "outside": "#c62828", "inconclusive": "#b26a00",
                "invalid": "#6a1b9a", "incomplete": "#757575", "not run": "#9e9e9e"}  # fmt: skip
MARKS = {"identical": "🔵", "within": "🟢", "outside": "🔴", "inconclusive": "🟡", "incomplete": "🟡",
         "invalid": "⛔", "not run": "⚪"}  # fmt: skip
MEANINGS = {
    "identical": "bitwise equal to the reference's output on every seed; an approximate kernel that reads so "
    "most likely never ran",
    "within": "every interval under the tolerance",
    "outside": "some reading over the tolerance (end to end or in situ)",
    "inconclusive": "an interval across the tolerance",
    "incomplete": "a value the floor has is missing",
    "invalid": "attention calls not served by the requested op",
    "not run": "no run ended ok",
}
INSITU_WHAT = "in-situ error / the exact floor's"


@dataclass(frozen=True)
class Terms:
    """A number with its interval and what the interval is."""

    value: float | None = None
    ci: tuple[float, float] | None = None
    ci_what: str = ""  # "95 % CI", "range over seeds"
    word: str = ""


NO_TERMS = Terms()


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
    decided_by: str = ""  # the part whose word is the verdict's (``Verdict.decided_by``)
    end_to_end: Terms = NO_TERMS  # the decoded output's own reading: its word, its energy ratio
    end_to_end_what: str = ""
    insitu: Terms | None = None  # the in-situ reading (ratio to the exact floor's, word), where there is one
    identical_seeds: tuple = ()  # seeds whose output is bitwise the reference's
    seeds: int = 0
    warnings: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    attention: str = ""  # why the attention is invalid, where it is
    emulator: bool = False  # a numerics model: its accuracy stands for a kernel's, its timing for none
    badge: str = ""  # an emulator's words after its name (``emulator_badge``); "" for a kernel


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


def _energy_terms(v: Verdict, metric: str) -> tuple[Terms, str]:
    """The error-energy reading named ``metric`` (its ratio, interval and word) and what it measures."""
    r = next((r for r in v.energy if r.metric == metric), None)
    if r is None or r.ratio is None:
        return Terms(word=r.word if r is not None else ""), ""
    ci = pair(r.ratio_ci)
    return Terms(
        float(r.ratio), ci, f"{100 * (1 - r.alpha):.10g} % CI" if ci else "", r.word
    ), f"{r.label} / the floor's"


def insitu_terms(res: ReportResults, v: Verdict) -> Terms | None:
    """The verdict's own in-situ reading (ratio to the exact floor's, with its interval and word), where
    it carries one (every regime since ``decided_by``; before, chaotic seeds only)."""
    got = v.insitu if v.insitu is not None and v.insitu.word else None
    if got is None:
        return None
    ci = pair(got.ratio_ci)
    value = float(got.ratio) if got.ratio is not None else None
    return Terms(
        value, ci if value is not None else None, "95 % CI" if ci and value is not None else "", got.word
    )


def verdict_terms(res: ReportResults, v: Verdict) -> tuple[str, Terms, str]:
    """(word, ratio with its interval, what the ratio is) of a verdict: the reading that decides it
    (``decided_by``): the in-situ one where it decides, else the error energy ``ratio_metric`` names.
    An identical verdict has no ratio."""
    word = v.word if v.word in WORDS else "inconclusive"
    if word == "identical":
        return word, Terms(), ""
    insitu = insitu_terms(res, v)
    by_insitu = v.decided_by == "insitu" or v.ratio_metric == "insitu"
    if by_insitu and insitu is not None and insitu.value is not None:
        return word, insitu, INSITU_WHAT
    if v.ratio is None or v.ratio_metric == "insitu":
        return word, Terms(), ""
    ci = pair(v.ratio_ci)
    label = next((r.label for r in v.energy if r.metric == v.ratio_metric), "error energy")
    level = next((r.alpha for r in v.energy if r.metric == v.ratio_metric), 0.05)
    return (
        word,
        Terms(float(v.ratio), ci, f"{100 * (1 - level):.10g} % CI" if ci else ""),
        f"{label} / the floor's",
    )


def end_to_end_terms(v: Verdict) -> tuple[Terms, str]:
    """The decoded output's reading alone (everything but in situ): its word, and the error-energy ratio
    that decides it (the one the verdict names, else the largest that reads its word, else the largest)."""
    word = v.end_to_end_word or ("" if v.decided_by == "insitu" else v.word)
    named = v.decided_by if any(r.metric == v.decided_by for r in v.energy) else ""
    if not named:
        same = [r for r in v.energy if r.word == word and r.ratio is not None] or [
            r for r in v.energy if r.ratio is not None
        ]
        named = (
            max(same, key=lambda r: r.ratio if math.isfinite(r.ratio) else math.inf).metric if same else ""
        )
    terms, what = _energy_terms(v, named) if named else (Terms(), "")
    return Terms(terms.value, terms.ci, terms.ci_what, word), what


def speed_terms(t: SpeedTest | None) -> Terms:
    """Speed-up (reference time / arm time) with its interval and the test's word."""
    if t is None or not t.measured or t.speedup is None:
        return Terms(word="no timing")
    ci = pair(t.speedup_ci)
    return Terms(float(t.speedup), ci, f"{100 * (1 - t.alpha):.10g} % CI" if ci else "", t.word)


NO_SPEED = "no speed-up: an emulator's timing is no kernel's"


def is_emulator(res: ReportResults, arm: str) -> bool:
    """Whether the arm's backend is a numerics model (run.json's word, else the aggregate's label)."""
    if any(r.emulated for r in res.runs if r.arm == arm):
        return True
    agg = res.arm(arm)
    return agg is not None and agg.timing_label == "an emulator's timing"


def plain_words(text: str, width: int = 0) -> str:
    """Text read from a record as words on one line: every control or format character (an escape
    sequence's ESC, a line break, a bidi override) a space, runs of spaces one; cut at a word to
    ``width`` characters (' ...' marking the cut) where ``width`` is given. Markdown and HTML escape
    it further where they write it."""
    flat = "".join(" " if unicodedata.category(c).startswith("C") else c for c in str(text))
    out = " ".join(flat.split())
    if width and len(out) > width:
        head = out[: width - 4]
        out = (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(" ;,:") + " ..."
    return out


def emulator_provenance(res: ReportResults, arm: str) -> Provenance | None:
    """What the arm's emulator models and its fidelity: the first of its runs whose attention record
    carries a provenance (None: not an emulator, or the records say nothing of it)."""
    for r in res.runs:
        if r.arm == arm and r.attn is not None:
            found = provenance_of(r.attn.backend)
            if found is not None:
                return found
    return None


BADGE_WIDTH = 80  # the badge's most characters: it stands after a name in a line read at a glance


def emulator_badge(res: ReportResults, arm: str) -> str:
    """The words after an emulator's name, said alike by every renderer: its provenance's badge
    ('emulator of SageAttention2 d1a57a5 Triton, measured on H200', '... not measured'), 'emulator'
    where its records carry no provenance, '' for no emulator."""
    if not is_emulator(res, arm):
        return ""
    found = emulator_provenance(res, arm)
    return plain_words(found.badge(), BADGE_WIDTH) if found is not None else "emulator"


def emulator_detail(res: ReportResults, arm: str) -> str:
    """One line on what the arm's emulator models and how far that was checked: 'arm: emulator of
    <kernel>, <fidelity>' ('' where no provenance is recorded); plain text, escaped where written."""
    found = emulator_provenance(res, arm) if is_emulator(res, arm) else None
    if found is None:
        return ""
    fidelity = found.fidelity.text()
    if found.changed:  # the variant's figures no longer apply
        fidelity = f"not measured with {', '.join(found.changed)} changed (the variant: {fidelity})"
    return plain_words(f"{arm}: emulator of {found.kernel.text() or found.kernel.short}, {fidelity}", 600)


def readings(res: ReportResults) -> list[Reading]:
    """One reading per candidate verdict, in the report's order."""
    base = accepted_baseline(res)
    out = []
    for v in res.verdicts:
        if v.role != "candidate":
            continue
        word, ratio, what = verdict_terms(res, v)
        e2e, e2e_what = end_to_end_terms(v)
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
                decided_by=v.decided_by,
                end_to_end=e2e,
                end_to_end_what=e2e_what,
                insitu=insitu_terms(res, v) if word != "not run" else None,
                identical_seeds=tuple(v.identical_seeds),
                seeds=len({sv.seed for sv in v.per_seed}) or len(v.seeds) or v.measured,
                warnings=tuple(v.warnings),
                missing=tuple(dict.fromkeys(v.missing)),
                attention=v.attention if v.attention_ok is False else "",
                emulator=is_emulator(res, v.arm),
                badge=emulator_badge(res, v.arm),
            )
        )
    return out


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
    judged = judged_energies()
    checks = [r for v in res.verdicts for r in v.energy if r.metric in judged]
    if not checks:
        return []
    names = [c.metric for c in checks]
    metric = max(set(names), key=lambda m: (names.count(m), m == "video_mse"))
    floors = [s.floor for s in next(c for c in checks if c.metric == metric).per_seed if s.floor]
    pooled = sum(floors) / len(floors) if floors else None
    out = []
    m = energy_metrics()[metric]  # its error energy, read off each comparison as the verdict reads it
    for arm in res.noise_floor_arms:
        vals = [(m.energy_value(c), m.weight(c)) for c in res.comparisons if c.b.arm == arm and c.measured]
        vals = [(x, w) for x, w in vals if x is not None and math.isfinite(x)]
        if not vals or not pooled:
            continue
        energy = sum(x * w for x, w in vals) / sum(w for _, w in vals)
        agg = res.arm(arm)
        sp = speed_terms(agg.speed.get("s_per_step") if agg is not None else None)
        out.append(FloorPoint(arm, sp, energy / pooled, metric))
    return out


def interval_text(t: Terms, fmt, what: str = "") -> str:
    """' (95 % CI 0.31 to 1.05[; what])', or ' (what)' without an interval, or '' (``fmt`` writes a
    bound; its trailing 'x' is dropped in a range)."""
    bits = [f"{t.ci_what} {range_text(t.ci[0], t.ci[1], lambda x: fmt(x).removesuffix('x'))}"] if t.ci else []
    bits += [what] if what else []
    return f" ({'; '.join(bits)})" if bits else ""


def ratio_line(r: Reading) -> str:
    """'error energy 27.5x the floor's (range over seeds 12.1 to 40.2; video MSE), tolerance 2x'; an
    identical reading's seeds instead (it has no ratio)."""
    if r.word == "identical":
        return identical_line(r)
    if r.ratio.value is None:
        return f"no error ratio ({r.regime}), tolerance {r.tolerance:g}x"
    what = r.ratio_what.removesuffix(" / the floor's").removesuffix(" / the exact floor's")
    return (
        f"{ratio_text(r.ratio.value)} the floor's{interval_text(r.ratio, ratio_text, what)}, "
        f"tolerance {r.tolerance:g}x"
    )


def identical_line(r: Reading) -> str:
    """'identical on 2 of 2 seed(s): output bitwise equal to the reference's' (every seed), else which."""
    n, of = len(r.identical_seeds), r.seeds or len(r.identical_seeds)
    if r.word == "identical":
        return f"identical on {n} of {of} seed(s): output bitwise equal to the reference's"
    return f"identical on seed(s) {', '.join(map(str, r.identical_seeds))} ({n} of {of}); the others judged"


def end_to_end_line(r: Reading, sep: str = ": ") -> str:
    """'end to end: inconclusive 1.07x the floor's (97.5 % CI 0.49 to 2.37; video MSE), tolerance 2x'."""
    t = r.end_to_end
    if t.value is None:
        return f"end to end{sep}{t.word or NA}: no error ratio ({r.regime}), tolerance {r.tolerance:g}x"
    what = r.end_to_end_what.removesuffix(" / the floor's")
    return (
        f"end to end{sep}{t.word or NA} {ratio_text(t.value)} the floor's{interval_text(t, ratio_text, what)}, "
        f"tolerance {r.tolerance:g}x"
    )


def insitu_line(r: Reading, sep: str = ": ") -> str:
    """'in situ: outside 3.20x the exact floor's (95 % CI 2.50 to 4.10)'."""
    t = r.insitu or Terms()
    if t.value is None:
        return f"in situ{sep}{t.word or NA}: no ratio"
    return f"in situ{sep}{t.word or NA} {ratio_text(t.value)} the exact floor's{interval_text(t, ratio_text)}"


def accuracy_lines(r: Reading, sep: str = ": ", bare: bool = False) -> list[str]:
    """The accuracy lines of a badge: an identical reading alone; else both readings where an in-situ
    one exists (the one that decides first), else the error line ('error: ...'; ``bare``: without
    'error'); the seeds found identical."""
    if r.word == "identical":
        return [identical_line(r)]
    if r.insitu is not None:
        both = [end_to_end_line(r, sep), insitu_line(r, sep)]
        lines = both[::-1] if r.decided_by == "insitu" else both
    else:
        lines = [ratio_line(r) if bare else f"error{sep}{ratio_line(r)}"]
    if r.identical_seeds:
        lines.append(identical_line(r))
    return lines


def speed_cell(t: Terms) -> str:
    """'0.57x (95 % CI 0.31 to 1.05): no significant difference', or 'no timing'."""
    if t.value is None:
        return t.word or "no timing"
    return f"{fmt_speedup(t.value)}{interval_text(t, fmt_speedup_value)}: {t.word or NA}"


def speed_line(what: str, t: Terms) -> str:
    """'DiT s/step speed-up 0.57x (95 % CI 0.31 to 1.05): no significant difference'."""
    return f"{what}: {speed_cell(t)}" if t.value is None else f"{what} speed-up {speed_cell(t)}"


@dataclass(frozen=True)
class Badge:
    reading: Reading
    css: (
        str  # the word as a CSS class: identical, within, outside, inconclusive, incomplete, invalid, not-run
    )
    ratio: str  # ratio_line
    step: str  # speed_line of DiT s/step
    total: str  # speed_line of the pipeline total
    note: str = ""  # why a run is missing or invalid
    lines: tuple[str, ...] = ()  # accuracy_lines: the readings (both where an in-situ one exists)


@dataclass(frozen=True)
class ReviewView:
    """The top of the page: a badge per candidate and the speed-against-accuracy figure."""

    badges: list[Badge]
    figure: str | None  # the figure's path as the page links it
    reference: str
    floor: str
    tolerance: float
    regime_note: str = ""
    legend: tuple[tuple[str, str, str], ...] = ()  # (word, its CSS class, what it means)


def badge(r: Reading) -> Badge:
    return Badge(
        reading=r,
        css=r.word.replace(" ", "-"),
        ratio=ratio_line(r),
        lines=tuple(accuracy_lines(r)),
        step=NO_SPEED if r.emulator else speed_line("DiT s/step", r.step),
        total="" if r.emulator else speed_line("pipeline total", r.total),
        note=r.text
        if r.word == "not run"
        else ("attention INVALID: see the attention calls" if r.word == "invalid" else ""),
    )


def review_view(res: ReportResults, figure: str | None) -> ReviewView:
    cands = readings(res)
    chaotic = [r.arm for r in cands if r.regime == "chaotic"]
    note = (
        "the floor is chaotic for "
        + ", ".join(chaotic)
        + " (exact attention alone changes the video): pixel metrics do not judge there, and each badge "
        "leads with the reading that decides"
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
        legend=tuple((w, w.replace(" ", "-"), MEANINGS[w]) for w in WORDS),
    )


def drawn_points(points: list, floors: list) -> tuple[list, list]:
    """The candidates and floors the figure draws: those with a place on both axes (floors: a speed-up)."""
    pts = [p for p in points if p[2][0] is not None and p[3][0] is not None]
    return pts, [f for f in floors if f[1][0] is not None]
