"""The top of the page: a badge per candidate (its reading as results.json holds it), the words' colours,
marks and meanings, and which points of the speed-against-accuracy figure are drawn."""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.model import Reading, ReportResults
from harness.rule import MEANINGS, WORDS

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
