"""The section model render.py (report.md) and html.py both render, the cells sections share, and the top
of the page: a badge per candidate (its reading as results.json holds it), the words' colours and marks."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.analysis.model import FrameGrid, Reading, ReportResults, Spread, Verdict
from harness.compare.significance import mean_sd_text
from harness.compare.summary import RunSummary
from harness.number_format import NA
from harness.rule import MEANINGS, WORDS
from harness.text_table import TextTable

ROLE_LABEL = {"reference": "reference", "noise_floor": "noise floor", "candidate": "candidate"}


@dataclass
class Section:
    id: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[TextTable] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)  # (caption, asset path)
    frame_grids: list[FrameGrid] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)  # (title, text)
    bullets: list[str] = field(default_factory=list)


def spread_text(s: Spread | None, fmt) -> str:
    if s is None or s.n == 0:
        return NA
    if s.n == 1 or s.min == s.max:
        return fmt(s.values[0] if s.n == 1 else s.min)
    mean = fmt(s.mean) if s.mean is not None else NA
    return f"{mean} [{fmt(s.min)}..{fmt(s.max)}]"


def role_css(role: str) -> str:
    return {"reference": "reference", "noise_floor": "noise-floor"}.get(role, "")


def row_css(r: RunSummary) -> str:
    return role_css(r.role) if r.ok else "not-ok"


def status_text(r: RunSummary) -> str:
    return r.status if r.ok else f"{r.status}: {r.reason or 'no reason recorded'}"


def mean_sd_cell(s: Spread | None) -> str:
    if s is None or s.n == 0:
        return NA
    return mean_sd_text(s.mean, s.std, s.n, unit="")


# Each word of harness.rule.WORDS (in its order) its colour on the page and its mark in pr.md and the job summary.
WORD_COLOURS = dict(
    zip(WORDS, ("#1565c0", "#2e7d32", "#c62828", "#b26a00", "#757575", "#6a1b9a", "#9e9e9e"), strict=True)
)
MARKS = dict(zip(WORDS, ("🔵", "🟢", "🔴", "🟡", "🟡", "⛔", "⚪"), strict=True))


@dataclass(frozen=True)
class ReviewView:
    """The top of the page: a badge per candidate and the speed-against-accuracy figure."""

    badges: list[Reading]  # each drawn as a badge (its word, a CSS class with spaces as hyphens)
    figure: str | None  # the figure's path as the page links it
    reference: str
    floor: str
    tolerance: float
    regime_note: str = ""
    legend: tuple[tuple[str, str, str], ...] = ()  # (word, its CSS class, what it means)


def review_view(res: ReportResults, figure: str | None) -> ReviewView:
    cands = res.review
    chaotic = ", ".join(r.arm for r in cands if r.regime == "chaotic")
    note = chaotic and (
        f"the floor is chaotic for {chaotic} (exact attention alone changes the video): pixel metrics do not "
        "judge there, and each badge leads with the reading that decides"
    )
    return ReviewView(
        badges=list(cands),
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
