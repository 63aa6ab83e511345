"""A hybrid schedule from data: the per-step curves of a dose-response (a site per DiT step) read at a
candidate's in-situ per-step errors predict what running it on some steps and the exact backend on the
others costs end to end. Errors of different steps are taken to add in energy (the ratio of a schedule
is the sum of its candidate steps' ratios; its bounds the sums of theirs, as wide as the steps'
errors moving together), an assumption the hybrid arms that ran check: each is placed beside its
prediction. The proposal is the fewest exact steps whose predicted upper bound
stays under the tolerance, the steps that cost most made exact first."""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.dose_response import (
    PREDICT_AGREES,
    DoseCurve,
    DoseResponse,
    SchedulePrediction,
    log_log_at,
)
from harness.number_format import ratio_text


def step_curves(dr: DoseResponse) -> dict[str, dict[int, DoseCurve]]:
    """reading -> DiT step -> the noise curve planted on that step alone."""
    out: dict[str, dict[int, DoseCurve]] = {}
    for c in dr.curves:
        if c.shape == "noise" and len(c.site.steps) == 1 and not (c.site.kinds or c.site.blocks):
            out.setdefault(c.metric, {})[c.site.steps[0]] = c
    return out


def _per_step_cost(curves: dict[int, DoseCurve], errors: dict[int, float]) -> dict[int, list[float]] | str:
    """step -> [ratio, lo, hi] the step's per-call error predicts on its curve; or why not."""
    out = {}
    for step, err in sorted(errors.items()):
        c = curves.get(step)
        if c is None:
            return f"no curve planted on step {step} alone"
        xs, pts = c.usable()
        got = [
            log_log_at(err, xs, ys)
            for ys in ([p.ratio for p in pts], *([p.ratio_ci[i] for p in pts] for i in (0, 1)))
        ]
        if any(g is None for g in got):
            return f"step {step}'s per-call error {err:.2g} lies outside the doses measured"
        out[step] = got
    return out


def _steps_text(steps: Sequence[int]) -> str:
    return f"step(s) {', '.join(map(str, steps))}" if steps else "no step"


def _predicted(costs: dict[int, list[float]], exact: set[int]) -> list[float]:
    return [sum(v[i] for s, v in costs.items() if s not in exact) for i in range(3)]


def schedule_predictions(
    dr: DoseResponse, readings: Sequence, rows: Sequence, verdicts: Sequence
) -> list[SchedulePrediction]:
    """For each in-situ candidate with per-step errors and each reading with per-step curves: the
    proposed schedule, and every hybrid arm of the candidate's backend predicted beside its measurement."""
    by_reading = step_curves(dr)
    energy = {v.arm: {e.metric: e for e in v.energy} for v in verdicts}
    out: list[SchedulePrediction] = []
    for r in readings:
        errors = {s.step: s.rel_l1 for s in r.per_step if s.step is not None and s.rel_l1}
        if not errors:
            continue
        for metric, curves in by_reading.items():
            label, tol = next(iter(curves.values())).label, next(iter(curves.values())).tolerance
            costs = _per_step_cost(curves, errors)
            if isinstance(costs, str):
                out.append(
                    SchedulePrediction(
                        candidate=r.candidate,
                        metric=metric,
                        text=f"{r.candidate}, {label}: no schedule predicted: {costs}",
                    )
                )
                continue
            out.append(_proposal(r.candidate, metric, label, tol, costs))
            for row in rows:
                if row.attn_type == r.attn_type and row.exact_steps:
                    out.append(
                        _check(r.candidate, metric, label, costs, row, energy.get(row.arm, {}).get(metric))
                    )
    return out


def _proposal(
    candidate: str, metric: str, label: str, tol: float, costs: dict[int, list[float]]
) -> SchedulePrediction:
    exact: set[int] = set()
    for step in sorted(costs, key=lambda s: -costs[s][2]):  # the costliest step made exact first
        if _predicted(costs, exact)[2] < tol:
            break
        exact.add(step)
    mid, lo, hi = _predicted(costs, exact)
    p = SchedulePrediction(candidate=candidate, metric=metric, exact_steps=sorted(exact))
    if exact == set(costs):
        least = min(costs, key=lambda s: costs[s][2])
        p.text = (
            f"{candidate}, {label}: no hybrid schedule stays within {tol:g}x: its least costly step ({least}) "
            f"alone predicts {ratio_text(costs[least][0])} the floor's ({ratio_text(costs[least][1])} to "
            f"{ratio_text(costs[least][2])})"
        )
        return p
    p.predicted, p.predicted_ci = mid, [lo, hi]
    p.text = (
        f"{candidate}, {label}: the fewest exact steps within {tol:g}x: exact on {_steps_text(p.exact_steps)} "
        f"of {len(costs)}, predicted {ratio_text(mid)} the floor's ({ratio_text(lo)} to {ratio_text(hi)})"
    )
    return p


def _check(
    candidate: str, metric: str, label: str, costs: dict[int, list[float]], row, measured
) -> SchedulePrediction:
    exact = set(row.exact_steps)
    mid, lo, hi = _predicted(costs, exact)
    p = SchedulePrediction(candidate=candidate, metric=metric, exact_steps=sorted(exact), arm=row.arm,
                           predicted=mid, predicted_ci=[lo, hi])  # fmt: skip
    p.text = (
        f"{row.arm} (exact on {_steps_text(p.exact_steps)}): predicted {label} {ratio_text(mid)} the floor's "
        f"({ratio_text(lo)} to {ratio_text(hi)}) from {candidate}'s per-step errors"
    )
    if measured is not None and measured.ratio:
        p.measured = measured.ratio
        p.agrees = lo / PREDICT_AGREES <= measured.ratio <= hi * PREDICT_AGREES
        p.text += f"; measured {ratio_text(measured.ratio)}: " + (
            "agrees" if p.agrees else "disagrees: the steps' errors do not add as the prediction assumes"
        )
    return p
