"""Hybrid schedules of a campaign: each arm that routes attention by step, its routing proven from its
per-step call counts, its speed-up and accuracy, beside the plain candidate, so a user can pick the
cheapest schedule within tolerance.
"""

from __future__ import annotations

from typing import Any

from harness.analysis.insitu_cost import run_spec
from harness.analysis.insitu_model import ScheduleRow
from harness.attention.wrappers import exact_on, exact_steps, schedule_text
from harness.records import RunSpec
from harness.store import CampaignDir


def routing(spec: RunSpec, summary: Any) -> tuple[str, str, int | None]:
    """(word, text, steps) from the run's per-step counts."""
    attn = summary.attn
    if attn is None or not attn.ranks or not any(rc.per_step for rc in attn.ranks.values()):
        return "not recorded", "no per-step call counts in attn_calls.json", summary.dit_steps
    steps = summary.dit_steps or max(int(s) for rc in attn.ranks.values() for s in rc.per_step if s != "-")
    wrong = []
    for rank, rc in sorted(attn.ranks.items()):
        for step in range(1, steps + 1):
            want = spec.schedule.exact if exact_on(spec.schedule, step, steps) else spec.attn_type
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
    exact = exact_steps(spec.schedule, steps)
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
    specs = {r.key: run_spec(campaign, r.key) for r in res.primary_runs if r.ok}
    scheduled = {s.attn_type for s in specs.values() if s is not None and s.schedule is not None}
    if not scheduled:
        return []
    rows: list[ScheduleRow] = []
    for r in res.primary_runs:
        spec = specs.get(r.key)
        if spec is None or any(x.arm == r.arm for x in rows):
            continue
        plain = spec.schedule is None and not spec.shadows and spec.attn_type in scheduled
        if spec.schedule is None and not plain:
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
