"""Predictions from the per-site curves of a dose-response: per-step curves read at a candidate's in-situ
per-step errors price a hybrid schedule (and propose the fewest exact steps), per-kind curves its whole
run. Errors of different sites are taken to add in energy (bounds summed: as wide as the errors moving
together), an assumption each hybrid arm that ran checks beside its prediction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.analysis.dose_response import (
    DoseCurve,
    DoseResponse,
    Prediction,
    SchedulePrediction,
    beside,
    read_at,
)
from harness.number_format import ratio_text


def site_curves(dr: DoseResponse, field: str, shape: str = "noise") -> dict[str, dict[Any, DoseCurve]]:
    """reading -> DiT step (``field`` "steps") or call kind ("kinds") -> the curve of ``shape``
    planted on that one alone."""
    out: dict[str, dict[Any, DoseCurve]] = {}
    for c in dr.curves:
        site = c.site.model_dump()
        one, others = site.pop(field), [v for v in site.values() if v]
        if c.shape == shape and len(one) == 1 and not others:
            out.setdefault(c.metric, {})[one[0]] = c
    return out


def _site_costs(
    curves: dict[Any, DoseCurve], errors: dict[Any, float], what: str
) -> dict[Any, list[float]] | str:
    """site -> [ratio, lo, hi] its per-call error predicts on its curve; or why not."""
    out = {}
    for site, err in sorted(errors.items()):
        c = curves.get(site)
        if c is None:
            return f"no curve planted on {what} {site} alone"
        if not c.usable()[0]:
            return f"the curve on {what} {site} has no interval at any dose"
        out[site] = read_at(c, err)
        if out[site] is None:
            return f"{what} {site}'s per-call error {err:.2g} lies outside the doses measured"
    return out


def kind_predictions(dr: DoseResponse, readings: Sequence, energy: dict[str, dict]) -> list[Prediction]:
    """Each in-situ candidate's run predicted from its per-kind errors, each kind on its own curve
    (the kinds' errors taken to add in energy), beside its end-to-end reading (``energy``: arm ->
    metric -> reading, ``dose_response.measured_readings``)."""
    noise, scale = site_curves(dr, "kinds"), site_curves(dr, "kinds", "scale")
    out = []
    for r in readings:
        errors = {k.kind: k.rel_l1 for k in r.per_kind if k.rel_l1}
        # a kind whose error is mostly a scale (in situ, most of it divides out) is read on its
        # kind's scale curve where one was planted: the pipeline absorbs a scale unlike noise
        scaled = {k.kind for k in r.per_kind if k.rel_l1 and (k.rel_l1_unscaled or k.rel_l1) < k.rel_l1 / 2}
        for metric, curves in noise.items() if errors and r.stats.rel_l1 else ():
            shaped = {k: c for k, c in scale.get(metric, {}).items() if k in scaled}
            curves = {**curves, **shaped}
            label = next(iter(curves.values())).label
            p = Prediction(
                candidate=r.candidate, per_call=r.stats.rel_l1, kinds=errors, shape="noise", metric=metric
            )
            each = ", ".join(
                f"{k} {e:.2g}" + (" as a scale" if k in shaped else "") for k, e in sorted(errors.items())
            )
            costs = _site_costs(curves, errors, "kind")
            if isinstance(costs, str):
                p.text = f"{r.candidate}, {label}: per kind ({each}): no prediction: {costs}"
            else:
                mid, lo, hi = _predicted(costs, set())
                p.predicted, p.predicted_ci = mid, [lo, hi]
                p.text = f"{r.candidate}: per kind ({each}): predicted {label} {ratio_text(mid)} the floor's ({ratio_text(lo)} to {ratio_text(hi)})"  # fmt: skip
                beside(p, energy.get(r.candidate, {}).get(metric), lo, hi)
            out.append(p)
    return out


def _steps_text(steps: Sequence[int]) -> str:
    return f"step(s) {', '.join(map(str, steps))}" if steps else "no step"


def _predicted(costs: dict[int, list[float]], exact: set[int]) -> list[float]:
    return [sum(v[i] for s, v in costs.items() if s not in exact) for i in range(3)]


def schedule_predictions(
    dr: DoseResponse, readings: Sequence, rows: Sequence, energy: dict[str, dict]
) -> list[SchedulePrediction]:
    """For each in-situ candidate with per-step errors and each reading with per-step curves: the
    proposed schedule, and every hybrid arm of the candidate's backend predicted beside its measurement
    (``energy``: arm -> metric -> reading)."""
    by_reading = site_curves(dr, "steps")
    out: list[SchedulePrediction] = []
    for r in readings:
        errors = {s.step: s.rel_l1 for s in r.per_step if s.step is not None and s.rel_l1}
        if not errors:
            continue
        for metric, curves in by_reading.items():
            label, tol = next(iter(curves.values())).label, next(iter(curves.values())).tolerance
            costs = _site_costs(curves, errors, "step")
            if isinstance(costs, str):
                text = f"{r.candidate}, {label}: no schedule predicted: {costs}"
                out.append(SchedulePrediction(candidate=r.candidate, metric=metric, text=text))
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
    beside(p, measured, lo, hi, "disagrees: the steps' errors do not add as the prediction assumes")
    return p
