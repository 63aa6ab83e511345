"""What shadows cost, and why a shadowed run's timings are never a baseline (the measurement's own time per
step, the s/step of a twin arm: same attention, no shadows); the hybrid schedules, each arm that routes
attention by step with its routing proven from its per-step counts, beside the plain candidate."""

from __future__ import annotations

import statistics
from typing import Any

from harness.analysis.insitu_model import ScheduleRow
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


def routing(spec: RunSpec, summary: Any) -> tuple[str, str, int | None]:
    """(word, text, steps) from the run's per-step counts."""
    from harness.attention.wrappers import exact_steps  # torch: only where a run has a schedule

    attn = summary.attn
    if attn is None or not attn.ranks or not any(rc.per_step for rc in attn.ranks.values()):
        return "not recorded", "no per-step call counts in attn_calls.json", summary.dit_steps
    steps = summary.dit_steps or max(int(s) for rc in attn.ranks.values() for s in rc.per_step if s != "-")
    exact, wrong = exact_steps(spec.schedule, steps), []
    for rank, rc in sorted(attn.ranks.items()):
        for step in range(1, steps + 1):
            want = spec.schedule.exact if step in exact else spec.attn_type
            got = rc.per_step.get(str(step), {})
            if not got:
                wrong.append(f"rank {rank} step {step}: no call recorded")
            elif set(got) != {want}:
                served = ", ".join(f"{k} {n}" for k, n in sorted(got.items()))
                wrong.append(f"rank {rank} step {step}: {served} (scheduled: {want})")
        if rc.per_step.get("-"):
            wrong.append(f"rank {rank}: {sum(rc.per_step['-'].values())} call(s) outside any step")
    if wrong:
        return "NOT as scheduled", "; ".join(wrong), steps
    calls = {
        s: sum(n for rc in attn.ranks.values() for n in rc.per_step.get(str(s), {}).values())
        for s in range(1, steps + 1)
    }
    return (
        "proven",
        f"{spec.schedule.exact} served every call of steps {', '.join(map(str, exact)) or 'none'}, {spec.attn_type} "
        f"every call of the others ({', '.join(f'{s}: {n}' for s, n in calls.items())} calls per step)",
        steps,
    )


def _estimate(insitu: Any, attn_type: str, exact: list[int]) -> float | None:
    """rel L1 on the exact trajectory if the schedule had run there: the candidate's per-step
    in-situ error on its steps, the floor's on the exact ones, weighted by calls."""
    readings = insitu.readings if insitu is not None else []
    reading = next((r for r in readings if r.attn_type == attn_type), None)
    if reading is None or not reading.per_step:
        return None
    num = den = 0.0
    for st in reading.per_step:
        value = st.floor_rel_l1 if st.step in exact else st.rel_l1
        if value is None:
            return None
        num += value * st.calls
        den += st.calls
    return num / den if den else None


def schedule_rows(res: Any, campaign: CampaignDir, insitu: Any = None) -> list[ScheduleRow]:
    """One row per schedule arm and per plain arm of a scheduled backend, fastest first."""
    from harness.attention.wrappers import exact_steps, schedule_text

    specs = {r.key: run_spec(campaign, r.key) for r in res.primary_runs if r.ok}
    scheduled = {s.attn_type for s in specs.values() if s is not None and s.schedule is not None}
    if not scheduled:
        return []
    rows: list[ScheduleRow] = []
    for r in res.primary_runs:
        spec = specs.get(r.key)
        if spec is None or any(x.arm == r.arm for x in rows):
            continue
        if spec.schedule is None and (spec.shadows or spec.attn_type not in scheduled):  # no plain arm
            continue
        row = ScheduleRow(arm=r.arm, attn_type=spec.attn_type, schedule="none (every step)", routing="n/a")
        if spec.schedule is not None:
            row.schedule = schedule_text(spec.schedule)
            row.routing, row.routing_text, row.steps = routing(spec, r)
            row.exact_steps = exact_steps(spec.schedule, row.steps) if row.steps else []
        agg = res.arm(r.arm)
        test = agg.speed.get("s_per_step") if agg is not None else None
        if test is not None and test.speedup:
            row.speedup, row.speed_words = test.speedup, test.words  # reference time / arm time
        verdict = next((v for v in res.verdicts if v.arm == r.arm), None)
        if verdict is not None:
            row.accuracy, row.equivalent = verdict.accuracy, verdict.equivalent
        row.insitu_estimate = _estimate(insitu, spec.attn_type, row.exact_steps)
        rows.append(row)
    rows.sort(key=lambda x: -(x.speedup or 0.0))
    cheapest = next((x for x in rows if x.equivalent and x.routing in ("proven", "n/a")), None)
    if cheapest is not None:
        cheapest.cheapest = True
    return rows
