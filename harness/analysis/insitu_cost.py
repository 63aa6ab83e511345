"""What shadows cost, and why a shadowed run's timings are never a baseline (the shadows run inside the step):
the measurement's own time per step, and the s/step of a twin arm (same attention, no shadows)."""

from __future__ import annotations

import statistics
from typing import Any

from harness.errors import HarnessError
from harness.insitu_records import InSituCall
from harness.records import RunSpec, steady_steps
from harness.store import CampaignDir

LABEL = "a shadowed run's timing"


def run_spec(campaign: CampaignDir, key: str) -> RunSpec | None:
    try:
        return campaign.run(key).record().spec
    except (HarnessError, OSError):
        return None


def measured_in_situ(r: Any, campaign: CampaignDir) -> bool:
    """Whether run ``r`` may hold in-situ records: it ended ok, or only its media are missing."""
    return r.ok or (r.status == "missing" and campaign.run(r.key).exists())


def measure_per_step(calls: list[InSituCall]) -> float | None:
    """The measurement's seconds per DiT step, steps 2..N as s/step counts them (the max over ranks)."""
    per: dict[int, dict[str, float]] = {}
    for c in calls:
        if c.step is not None:
            ranks = per.setdefault(c.step, {})
            ranks[c.rank] = ranks.get(c.rank, 0.0) + c.seconds
    if not per:
        return None
    return statistics.fmean(steady_steps([max(per[s].values()) for s in sorted(per)]))


def shadow_costs(res: Any, infos: list[Any], specs: dict[str, RunSpec | None]) -> None:
    """Fill each shadowed run's cost and mark its arm's timing as no baseline."""
    for info in infos:
        spec = specs.get(info.key)
        summary = res.run(info.key)
        info.s_per_step = summary.s_per_step if summary else None
        if spec is not None:
            twins = [
                r for r in res.runs
                if r.ok and r.arm != info.arm and (s := specs.get(r.key)) is not None
                and not s.shadows and s.insitu is None and s.schedule is None
                and s.choice() == spec.choice() and r.seed == summary.seed
            ]  # fmt: skip
            twins.sort(key=lambda r: (r.arm != res.reference_arm, r.repeat))
            if twins:
                info.twin = twins[0].arm
                vals = [r.s_per_step for r in twins if r.arm == info.twin and r.s_per_step is not None]
                info.twin_s_per_step = statistics.fmean(vals) if vals else None
        shadows = sum(1 for role in info.ops.values() if role != "primary")
        bits = [f"{shadows} shadow op(s) and an exact {info.yardstick} yardstick on {info.sample_rows} rows of "
                "every attention call"]  # fmt: skip
        if info.measure_s_per_step is not None:
            bits.append(f"the measurement itself {info.measure_s_per_step:.4g} s/step")
        if info.s_per_step is not None and info.twin_s_per_step:
            extra = info.s_per_step - info.twin_s_per_step
            bits.append(
                f"s/step {info.s_per_step:.4g} shadowed vs {info.twin_s_per_step:.4g} without shadows "
                f"({info.twin}, the same attention): {extra:+.4g} s/step, {info.s_per_step / info.twin_s_per_step:.2f}x"
            )
        else:
            bits.append("no arm with the same attention and no shadows to time it against")
        info.cost_text = "; ".join(bits)
        agg = res.arm(info.arm)
        if agg is not None:
            agg.timing_baseline = False
            agg.timing_label = LABEL
            agg.timing_note = f"never a timing baseline: {info.cost_text}"
        if info.arm == res.reference_arm:
            note = (
                f"the reference arm {info.arm} is shadowed: its timings hold the shadows, so speed-ups against it "
                "are no speed-ups (shadow a copy of the reference instead)"
            )
            if note not in res.notes:
                res.notes.append(note)
