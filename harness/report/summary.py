"""The summary a report opens with: one line for the campaign, then one per candidate arm.

Per candidate, short (the badge in words, ``report.review``): its verdict word with the reading
that decides it first ("identical" alone, without a ratio; both readings, each with its word, where
an in-situ reading exists: end to end and in situ), its DiT s/step and pipeline-total speed-up
(reference time / arm time) with its interval and word (the report's own speed tests,
``analysis.speed``: a speed word only when the interval clears the minimum effect and the
Holm-adjusted test rejects equal times; the speed section gives each test in full), whether its
attention calls were valid, and its warnings. The verdict's whole line is in the verdicts section.
pr.md takes its speed-ups from ``arm_speed`` here, so both files print the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.model import ReportResults
from harness.compare.significance import SpeedTest
from harness.report.cells import Section
from harness.report.review import Reading, readings, speed_line, verdict_line


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


def _validity_text(v) -> str:
    ok = v.attention_ok
    return {True: "attention valid", False: "attention INVALID"}.get(ok, "attention not recorded")


def candidate_line(r: Reading | None, v) -> str:
    """'arm: verdict <word>: <readings>; DiT s/step speed-up ...; pipeline total speed-up ...; attention
    valid[; WARNING: ...]'."""
    if r is None:
        return f"{v.arm}: verdict {v.word}; {_validity_text(v)}"
    parts = [
        verdict_line(r),
        speed_line("DiT s/step", r.step),
        speed_line("pipeline total", r.total),
        _validity_text(v),
    ]
    return f"{v.arm}: " + "; ".join(parts) + "".join(f"; WARNING: {w}" for w in r.warnings)


def incomplete_line(res: ReportResults, shown: int = 3) -> str:
    """One line: the report is incomplete, and why (the first problems; report.md lists them all)."""
    more = f"; and {len(res.errors) - shown} more" if len(res.errors) > shown else ""
    return f"INCOMPLETE: {len(res.errors)} problem(s): {'; '.join(res.errors[:shown])}{more}"


def summary_lines(res: ReportResults) -> list[str]:
    """The campaign line, then one line per candidate arm."""
    cands = [v for v in res.verdicts if v.role == "candidate"]
    head = (
        f"{res.scenario_name} / {res.campaign_id}: reference {res.reference_arm or 'none'}, "
        f"noise floor {', '.join(res.noise_floor_arms) or 'none'}, seeds {', '.join(map(str, res.seeds)) or 'n/a'}, "
        f"{len(cands)} candidate(s)"
    )
    lines = [head]
    reading = {r.arm: r for r in readings(res)}
    if res.errors:  # missing or unreadable data: said first, so that no reader takes the rest as whole
        lines.append(incomplete_line(res))
    for v in cands:
        runs = [r for r in res.runs if r.arm == v.arm]
        if runs and not any(r.ok for r in runs):
            r = runs[0]
            lines.append(f"{v.arm}: not run ({r.status}" + (f": {r.reason})" if r.reason else ")"))
            continue
        lines.append(candidate_line(reading.get(v.arm), v))
    lines += [insitu_copy_line(res, v) for v in res.verdicts if v.role == "insitu"]
    lines += finding_lines(res)
    return lines


def finding_lines(res: ReportResults) -> list[str]:
    """Where a candidate's in-situ error concentrates (``analysis.findings``), one line per finding."""
    return [f"finding: {f.text}" for r in (res.insitu.readings if res.insitu else []) for f in r.findings]


def insitu_copy_line(res: ReportResults, v) -> str:
    """What a shadowed copy of the exact trajectory is: not a candidate, its output against the
    reference's (bitwise, seed by seed) and what its shadows cost."""
    cmps = [
        c for c in res.comparisons if c.b.arm == v.arm and c.a.arm == res.reference_arm and c.b.repeat == 1
    ]
    same = [c for c in cmps if c.bitwise.files or (c.bitwise.video and c.bitwise.audio is not False)]
    info = next((i for i in (res.insitu.runs if res.insitu else []) if i.arm == v.arm), None)
    shadows = [name for name, role in (info.ops if info else {}).items() if role != "primary"]
    parts = [
        f"{v.arm}: the exact trajectory with shadows ({', '.join(shadows) or 'none'}): not a candidate, its "
        "evidence is the in-situ readings",
        f"output bitwise the reference's on {len(same)} of {len(cmps)} seed(s)"
        if cmps
        else "output not compared",
    ]
    if info is not None and info.cost_text:
        parts.append(f"cost: {info.cost_text}")
    return "; ".join(parts)


def summary_section(res: ReportResults) -> Section:
    """The summary as the report's first section (markdown and HTML render it alike)."""
    sec = Section("summary", "Summary")
    sec.bullets = summary_lines(res)
    return sec
