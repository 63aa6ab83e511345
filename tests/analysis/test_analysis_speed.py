"""harness.analysis.speed: each arm's speed tests in the design its runs allow (paired by seed and
repeat, blocked by seed, unpaired), Holm within each family of arms (candidates, noise floors, schedules,
shadowed copies), and what repeats: auto reached."""

from __future__ import annotations

import pytest

from harness.analysis.speed import auto_note, campaign_speed_tests, interval_widths, speed_families
from harness.compare.summary import RunSummary
from harness.rule import holm
from harness.scenario.verdict import VerdictRules


def run(arm: str, seed: int, repeat: int, s: float, role: str = "candidate") -> RunSummary:
    return RunSummary(key=f"{arm}@{seed}~r{repeat}", path="", arm=arm, seed=seed, repeat=repeat, role=role,
                      status="ok", s_per_step=s, pipeline_total_s=10 * s)  # fmt: skip


def test_designs_follow_the_runs():
    runs = [run("ref", s, r, 1.0 + 0.01 * r + 0.1 * s, "reference") for s in (1, 2) for r in (1, 2, 3)]
    runs += [
        run("fast", s, r, 0.5 + 0.005 * r + 0.05 * s + 0.001 * (r % 2)) for s in (1, 2) for r in (1, 2, 3)
    ]
    runs += [run("floor", s, 1, 1.2 + 0.1 * s, "noise_floor") for s in (1, 2)]
    tests = campaign_speed_tests(runs, "ref", VerdictRules())
    fast, floor = tests["fast"]["s_per_step"], tests["floor"]["s_per_step"]
    assert fast.design == "paired by seed and repeat" and fast.n_pairs == 6 and fast.word == "faster"
    assert fast.speedup == pytest.approx(2.0, rel=0.01)
    assert floor.design == "blocked by seed" and floor.n_pairs == 2
    every = [t for by in tests.values() for t in by.values()]
    assert all(t.p_adjusted is not None and t.p_adjusted >= t.p for t in every if t.p is not None)
    widths = interval_widths(tests, {"fast": "candidate", "floor": "noise_floor"})
    assert set(widths) == {"fast DiT s/step", "fast pipeline total"} and widths["fast DiT s/step"] < 0.02
    note = auto_note(tests, {"fast": "candidate"}, 3, 0.02, 10)
    assert note == "repeats auto: 3 round(s); every speed-up interval is narrower than 2%"
    assert "not under the target" in auto_note(tests, {"fast": "candidate"}, 3, 1e-12, 10)


def test_no_shared_seed_is_unpaired_and_one_run_a_side_has_no_interval():
    runs = [run("ref", 1, 1, 1.0, "reference"), run("ref", 1, 2, 1.02, "reference"), run("x", 2, 1, 1.0),
            run("x", 2, 2, 1.01), run("y", 3, 1, 1.0)]  # fmt: skip
    tests = campaign_speed_tests(runs, "ref", VerdictRules())
    assert tests["x"]["s_per_step"].design == "unpaired"
    y = tests["y"]["s_per_step"]
    assert y.speedup_ci is None and y.word == "too few runs"


def _family_campaign() -> list[RunSummary]:
    """A candidate 10 % faster (paired p about 0.013, not tiny), two noise floors and a hybrid schedule
    that match the reference: Holm over all their tests withheld the candidate's word."""
    jitter, noise = [0.0, 0.02, -0.02, 0.01], [0.04, -0.04, 0.02, -0.02]
    runs = [run("ref", 1, r + 1, 1.0 + j, "reference") for r, j in enumerate(jitter)]
    runs += [
        run("cand", 1, r + 1, (1.0 + j) / 1.1 * (1 + e))
        for r, (j, e) in enumerate(zip(jitter, noise, strict=True))
    ]
    for arm in ("floor", "floor2"):
        runs += [
            run(arm, 1, r + 1, (1.0 + j) * (1 + 0.01 * (-1) ** r), "noise_floor")
            for r, j in enumerate(jitter)
        ]
    runs += [run("hyb", 1, r + 1, (1.0 + j) * (1 - 0.01 * (-1) ** r)) for r, j in enumerate(jitter)]
    return runs


def test_holm_family_is_the_candidates_only():
    """Floors go in a family of their own: the candidate's tests are adjusted over the candidates' tests."""
    runs = [r for r in _family_campaign() if r.arm != "hyb"]
    tests = campaign_speed_tests(runs, "ref", VerdictRules())
    cand, floor = tests["cand"], tests["floor"]
    assert all(t.family == "candidates" and t.family_size == 2 for t in cand.values())
    assert all(t.family == "noise floors" and t.family_size == 4 for t in floor.values())
    step, total = cand["s_per_step"], cand["pipeline_total_s"]
    assert 0.05 / 6 < step.p < 0.05 / 2  # significant over its 2 tests, not over 6 with the floors'
    assert [step.p_adjusted, total.p_adjusted] == pytest.approx(holm([step.p, total.p]))
    assert step.word == "faster" and "Holm" in step.line and "over 2 tests" in step.line
    every = [t.p for by in tests.values() for t in by.values()]
    assert holm(every)[0] > 0.05  # what one report-wide family gave the same test


def test_families_put_schedules_and_shadowed_copies_apart():
    runs = _family_campaign()
    together = campaign_speed_tests(runs, "ref", VerdictRules())  # the hybrid is a candidate by its role
    assert (
        together["cand"]["s_per_step"].family_size == 4
        and together["hyb"]["s_per_step"].family == "candidates"
    )
    roles = {r.arm: r.role for r in runs}
    families = speed_families(roles, schedules={"hyb"}, shadowed_copies={"floor2"})
    assert families == {"ref": "reference", "cand": "candidates", "floor": "noise floors",
                        "floor2": "shadowed copies", "hyb": "schedules"}  # fmt: skip
    tests = campaign_speed_tests(runs, "ref", VerdictRules(), families=families)
    assert {a: {t.family_size for t in by.values()} for a, by in tests.items()} == {
        "cand": {2},
        "floor": {2},
        "floor2": {2},
        "hyb": {2},
    }
    assert (
        tests["hyb"]["s_per_step"].family == "schedules"
        and tests["floor2"]["s_per_step"].family == "shadowed copies"
    )
    for arm in ("cand", "hyb"):  # each family adjusted on its own
        ps = [t.p for t in tests[arm].values()]
        assert [t.p_adjusted for t in tests[arm].values()] == pytest.approx(holm(ps))


def test_identical_timings_claim_nothing():
    runs = [run("ref", 1, r, 1.0, "reference") for r in (1, 2, 3)] + [run("x", 1, r, 1.0) for r in (1, 2, 3)]
    x = campaign_speed_tests(runs, "ref", VerdictRules())["x"]["s_per_step"]
    assert x.word == "zero spread" and "no interval, no claim" in x.line and x.speedup_ci is None
    assert interval_widths({"x": {"s_per_step": x}}, {"x": "candidate"}) == {"x DiT s/step": 0.0}
    note = auto_note({"x": {"s_per_step": x}}, {"x": "candidate"}, 3, 0.02, 10)
    assert note.endswith("narrower than 2% (1 with zero spread: no interval, nothing to narrow)")
