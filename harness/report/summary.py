"""The summary a report opens with, as ``analysis.sentences`` wrote it into results.json."""

from __future__ import annotations

from harness.analysis.model import ReportResults
from harness.report.cells import Section


def summary_section(res: ReportResults) -> Section:
    """The summary as the report's first section (markdown and HTML render it alike)."""
    return Section("summary", "Summary", bullets=list(res.summary.lines))
