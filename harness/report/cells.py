"""The section model that render.py (report.md) and html.py both render, and the cells sections share."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.analysis.model import FrameGrid, Spread, Verdict
from harness.compare.significance import mean_sd_text
from harness.compare.summary import RunSummary
from harness.number_format import NA
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
