"""The summary a report opens with, as ``analysis.sentences`` wrote it into results.json (one line
for the campaign, then one per candidate, each at most ``sentences.LINE`` characters), and each
arm's speed tests, which pr.md's speed table prints as report.md's speed section does."""

from __future__ import annotations

from harness.analysis.model import ReportResults
from harness.compare.significance import SpeedTest
from harness.report.cells import Section


def arm_speed(res: ReportResults, arm: str) -> tuple[SpeedTest, SpeedTest]:
    """An arm's DiT s/step and pipeline total tests against the reference (samples: runs); an
    untested timing reads as an empty test."""
    agg = res.arm(arm)
    tests = agg.speed if agg is not None else {}
    return (
        tests.get("s_per_step") or SpeedTest(what="DiT s/step"),
        tests.get("pipeline_total_s") or SpeedTest(what="pipeline total"),
    )


def summary_section(res: ReportResults) -> Section:
    """The summary as the report's first section (markdown and HTML render it alike)."""
    return Section("summary", "Summary", bullets=list(res.summary.lines))
