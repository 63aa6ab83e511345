"""The summary a report opens with: one line for the campaign, then one per candidate arm.

Per candidate: its DiT s/step and pipeline-total speed-up against the reference with the
significance test on the same line (a ratio word only when the test is significant), its
verdict against the noise floor, and whether its attention calls were valid. pr.md takes its
speed-ups from ``arm_speed`` here, so both files print the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.compare.summary import RunSummary
from harness.report.results import ReportResults
from harness.significance import SpeedTest, compare_samples


@dataclass(frozen=True)
class ArmSpeed:
    """An arm's timing against the reference, pooled over its runs (seeds, repeats)."""

    step: SpeedTest  # samples: DiT steps 2..N of every run (the s/step convention)
    total: SpeedTest  # samples: one pipeline total per run

    @staticmethod
    def _speedup(t: SpeedTest) -> float | None:
        return None if t.mean_a is None or not t.mean_b else t.mean_a / t.mean_b

    @property
    def step_speedup(self) -> float | None:
        """Reference time / arm time (above 1: the arm is faster)."""
        return self._speedup(self.step)

    @property
    def total_speedup(self) -> float | None:
        return self._speedup(self.total)


def _steps(runs: list[RunSummary]) -> list[float]:
    """Steps 2..N of every run that finished ok (step 1 alone when it is the only one)."""
    out: list[float] = []
    for r in runs:
        if r.ok and r.step_seconds:
            out.extend(r.step_seconds[1:] if len(r.step_seconds) > 1 else r.step_seconds)
    return out


def arm_speed(res: ReportResults, arm: str) -> ArmSpeed:
    ref = [r for r in res.runs if r.arm == res.reference_arm]
    mine = [r for r in res.runs if r.arm == arm]
    step = compare_samples(_steps(ref), _steps(mine), samples="steps")
    total = compare_samples(
        [r.pipeline_total_s for r in ref if r.ok], [r.pipeline_total_s for r in mine if r.ok], samples="runs"
    )
    return ArmSpeed(step=step, total=total)


def fmt_speedup(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def _speed_text(what: str, t: SpeedTest, speedup: float | None) -> str:
    if t.outcome == "not_measured":
        return f"{what}: no timing"
    return f"{what} speed-up {fmt_speedup(speedup)}: {t.words}"


def _verdict_text(v) -> str:
    within = getattr(v, "within_noise_floor", None)
    if getattr(v, "measured", 0) == 0:
        return "verdict: not measured"
    if within is None:
        return "verdict: not judged (no noise floor)"
    text = "within the noise floor" if within else "OUTSIDE the noise floor"
    inside = getattr(v, "stats_inside", None)
    if inside is False:
        text += ", global statistics outside the exact runs' spread"
    return f"verdict: {text}"


def _validity_text(v) -> str:
    ok = getattr(v, "attention_ok", None)
    return {True: "attention valid", False: "attention INVALID"}.get(ok, "attention not recorded")


def summary_lines(res: ReportResults) -> list[str]:
    """The campaign line, then one line per candidate arm."""
    cands = [v for v in res.verdicts if getattr(v, "role", "candidate") == "candidate"]
    head = (
        f"{res.scenario_name} / {res.campaign_id}: reference {res.reference_arm or 'none'}, "
        f"noise floor {', '.join(res.noise_floor_arms) or 'none'}, seeds {', '.join(map(str, res.seeds)) or 'n/a'}, "
        f"{len(cands)} candidate(s)"
    )
    lines = [head]
    for v in cands:
        runs = [r for r in res.runs if r.arm == v.arm]
        if runs and not any(r.ok for r in runs):
            r = runs[0]
            lines.append(f"{v.arm}: not run ({r.status}" + (f": {r.reason})" if r.reason else ")"))
            continue
        sp = arm_speed(res, v.arm)
        parts = [
            _speed_text("DiT s/step", sp.step, sp.step_speedup),
            _speed_text("pipeline total", sp.total, sp.total_speedup),
            _verdict_text(v),
            _validity_text(v),
        ]
        lines.append(f"{v.arm}: " + "; ".join(parts))
    return lines


def summary_section(res: ReportResults):
    """The summary as the report's first section (markdown and HTML render it alike)."""
    from harness.report.tables import Section

    sec = Section("summary", "Summary")
    sec.bullets = summary_lines(res)
    return sec


SPEEDUP_CONVENTION = (
    "speed-up=reference time / run time (above 1 = faster); significance: Welch's two-sided t-test, "
    "alpha 0.05, on DiT steps 2..N of every run (s/step) and on one pipeline total per run; a ratio word "
    "only when the test is significant"
)
