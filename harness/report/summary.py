"""The summary a report opens with, as ``analysis.sentences`` wrote it into results.json (one line
for the campaign, then one per candidate, each at most ``sentences.LINE`` characters), and each
arm's speed tests, which pr.md's speed table prints as report.md's speed section does."""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.model import ReportResults
from harness.compare.significance import SpeedTest
from harness.report.cells import Section


@dataclass(frozen=True)
class ArmSpeed:
    """An arm's timing against the reference: the report's speed tests (samples: runs)."""

    step: SpeedTest
    total: SpeedTest

    @property
    def step_speedup(self) -> float | None:
        """Reference time / arm time (above 1: the arm is faster)."""
        return self.step.speedup

    @property
    def total_speedup(self) -> float | None:
        return self.total.speedup


def arm_speed(res: ReportResults, arm: str) -> ArmSpeed:
    agg = res.arm(arm)
    tests = agg.speed if agg is not None else {}
    return ArmSpeed(
        step=tests.get("s_per_step") or SpeedTest(what="DiT s/step"),
        total=tests.get("pipeline_total_s") or SpeedTest(what="pipeline total"),
    )


def summary_section(res: ReportResults) -> Section:
    """The summary as the report's first section (markdown and HTML render it alike)."""
    return Section("summary", "Summary", bullets=list(res.summary.lines))
