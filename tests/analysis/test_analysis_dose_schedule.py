"""harness.analysis.dose_schedule: per-step curves read at a candidate's per-step errors predict a
hybrid schedule's error (the steps' ratios added), propose the fewest exact steps within the
tolerance, and set a hybrid arm that ran beside its prediction."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analysis.dose_response import DoseCurve, DosePoint, DoseResponse
from harness.analysis.dose_schedule import schedule_predictions
from harness.analysis.insitu_model import InSituReading, InSituStep, ScheduleRow
from harness.analysis.intervals import RatioReading
from harness.insitu_records import CallSiteFilter

DOSES = [1e-4, 1e-3, 1e-2, 1e-1]


def step_curve(step: int, gain: float, spread: float = 1.5) -> DoseCurve:
    """Ratio gain x (d / 1e-3)^2 (energy grows as the square of the per-call error)."""
    pts = []
    for d in DOSES:
        r = gain * (d / 1e-3) ** 2
        pts.append(DosePoint(dose=d, arm=f"s{step}_{d:g}", ratio=r, ratio_ci=[r / spread, r * spread]))
    return DoseCurve(shape="noise", site=CallSiteFilter(steps=[step]), metric="video_mse", label="video MSE",
                     tolerance=2.0, points=pts)  # fmt: skip


def reading(errors: dict[int, float]) -> InSituReading:
    return InSituReading(
        candidate="cand", attn_type="kern", per_step=[InSituStep(step=s, rel_l1=e) for s, e in errors.items()]
    )


def test_the_schedule_adds_the_steps_ratios_and_makes_the_costliest_steps_exact_first():
    # step 1 costs 100x its curve's 1e-3 value, steps 2 and 3 far less: only step 1 needs to be exact
    dr = DoseResponse(curves=[step_curve(1, 100.0), step_curve(2, 0.5), step_curve(3, 0.2)])
    errors = {1: 1e-3, 2: 1e-3, 3: 1e-3}
    row = ScheduleRow(arm="hybrid", attn_type="kern", schedule="", exact_steps=[1, 3], steps=3)
    measured = RatioReading(metric="video_mse", label="video MSE", ratio=0.6, ratio_ci=[0.4, 0.9])
    proposal, check = schedule_predictions(dr, [reading(errors)], [row], {"hybrid": {"video_mse": measured}})
    assert proposal.arm == "" and proposal.exact_steps == [1]
    assert proposal.predicted == pytest.approx(0.7) and proposal.predicted_ci == pytest.approx(
        [0.7 / 1.5, 1.05]
    )
    assert (
        "the fewest exact steps within 2x: exact on step(s) 1 of 3, predicted 0.70x the floor's (0.47x to 1.05x)"
        in proposal.text
    )
    assert check.arm == "hybrid" and check.predicted == pytest.approx(0.5) and check.agrees
    assert check.text.endswith("measured 0.60x: agrees")


def test_no_hybrid_within_the_tolerance_and_a_far_measurement_are_said():
    dr = DoseResponse(curves=[step_curve(1, 100.0), step_curve(2, 50.0)])
    errors = {1: 1e-2, 2: 1e-2}
    row = ScheduleRow(arm="hybrid", attn_type="kern", schedule="", exact_steps=[1], steps=2)
    far = RatioReading(metric="video_mse", label="video MSE", ratio=1e8, ratio_ci=[1e7, 1e9])
    proposal, check = schedule_predictions(dr, [reading(errors)], [row], {"hybrid": {"video_mse": far}})
    assert proposal.exact_steps == [1, 2] and proposal.predicted is None
    assert (
        "no hybrid schedule stays within 2x: its least costly step (2) alone predicts 5,000x" in proposal.text
    )
    assert check.agrees is False and "disagrees" in check.text


def test_a_step_without_its_curve_or_beyond_the_doses_predicts_nothing():
    dr = DoseResponse(curves=[step_curve(1, 1.0)])
    (p,) = schedule_predictions(dr, [reading({1: 1e-3, 2: 1e-3})], [], {})
    assert p.predicted is None and "no curve planted on step 2 alone" in p.text
    (q,) = schedule_predictions(dr, [reading({1: 0.5})], [], {})
    assert "step 1's per-call error 0.5 lies outside the doses measured" in q.text
    # curves planted on every call or on a kind are no step curves
    whole = DoseResponse(curves=[step_curve(1, 1.0).model_copy(update={"site": CallSiteFilter()})])
    assert schedule_predictions(whole, [reading({1: 1e-3})], [], {}) == []


@settings(max_examples=50, deadline=None)
@given(
    gains=st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=6),
    err=st.floats(1e-4, 1e-1),
)
def test_the_proposal_is_the_fewest_exact_steps_within_the_tolerance(gains, err):
    """No schedule with fewer exact steps has its predicted upper bound under the tolerance."""
    import itertools

    dr = DoseResponse(curves=[step_curve(i + 1, g) for i, g in enumerate(gains)])
    errors = {i + 1: err for i in range(len(gains))}
    (p,) = schedule_predictions(dr, [reading(errors)], [], {})
    hi = {s: g * (err / 1e-3) ** 2 * 1.5 for s, g in zip(errors, gains, strict=True)}

    def bound(exact):
        return sum(v for s, v in hi.items() if s not in exact)

    if p.predicted is not None:
        assert bound(set(p.exact_steps)) == pytest.approx(p.predicted_ci[1]) and p.predicted_ci[1] < 2.0
    fewer = [set(c) for n in range(len(p.exact_steps)) for c in itertools.combinations(errors, n)]
    assert all(bound(c) >= 2.0 * (1 - 1e-9) for c in fewer)


def test_a_candidates_run_is_predicted_from_its_per_kind_errors_each_on_its_kinds_curve():
    """Curves planted on one call kind each: a candidate's per-kind in-situ errors, each read on its
    kind's curve, add to the run's prediction, set beside its end-to-end reading; a kind with no
    curve of its own predicts nothing, and a step curve is no kind curve."""
    from harness.analysis.dose_schedule import kind_predictions
    from harness.analysis.insitu_model import InSituKind
    from harness.insitu_records import InSituStats

    def kind_curve(kind: str, gain: float) -> DoseCurve:
        return step_curve(1, gain).model_copy(update={"site": CallSiteFilter(kinds=[kind])})

    dr = DoseResponse(curves=[kind_curve("dit_self", 10.0), kind_curve("refiner", 0.5), step_curve(1, 99.0)])
    r = reading({}).model_copy(update={
        "stats": InSituStats(rel_l1=2e-3),
        "per_kind": [InSituKind(kind="dit_self", rel_l1=1e-3), InSituKind(kind="refiner", rel_l1=1e-2)],
    })  # fmt: skip
    measured = RatioReading(metric="video_mse", label="video MSE", ratio=70.0, ratio_ci=[50.0, 90.0])
    (p,) = kind_predictions(dr, [r], {"cand": {"video_mse": measured}})
    # dit_self: 10 x 1^2 = 10; refiner: 0.5 x 10^2 = 50; bounds the sums of each kind's (x/÷ 1.5)
    assert p.predicted == pytest.approx(60.0) and p.predicted_ci == pytest.approx([40.0, 90.0])
    assert p.kinds == {"dit_self": 1e-3, "refiner": 1e-2} and p.measured == 70.0 and p.agrees
    assert p.text == (
        "cand: per kind (dit_self 0.001, refiner 0.01): predicted video MSE 60x the floor's (40x to 90x); "
        "measured 70x: agrees"
    )
    alone = DoseResponse(curves=[kind_curve("dit_self", 10.0)])
    (q,) = kind_predictions(alone, [r], {})
    assert q.predicted is None and q.text.endswith("no prediction: no curve planted on kind refiner alone")
    assert kind_predictions(DoseResponse(curves=[step_curve(1, 1.0)]), [r], {}) == []
    # an error that is mostly a scale (in situ) is read on its kind's scale curve where one was planted
    gentle = kind_curve("refiner", 0.05).model_copy(update={"shape": "scale"})
    both = DoseResponse(curves=[*dr.curves, gentle])
    (n,) = kind_predictions(both, [r], {})
    assert n.predicted == pytest.approx(60.0)  # noise-like errors: the noise curves, as before
    as_scale = r.model_copy(update={"per_kind": [
        r.per_kind[0], r.per_kind[1].model_copy(update={"rel_l1_unscaled": 1e-3})
    ]})  # fmt: skip
    (g,) = kind_predictions(both, [as_scale], {})
    assert g.predicted == pytest.approx(10.0 + 5.0) and "refiner 0.01 as a scale" in g.text
    blind = kind_curve("refiner", 0.5)  # no floor: no interval at any dose
    blind = blind.model_copy(
        update={"points": [q.model_copy(update={"ratio_ci": None}) for q in blind.points]}
    )
    (b,) = kind_predictions(DoseResponse(curves=[kind_curve("dit_self", 10.0), blind]), [r], {})
    assert b.text.endswith("no prediction: the curve on kind refiner has no interval at any dose")
