"""harness.analysis.speed: each arm's speed tests in the design its runs allow (paired by seed and
repeat, blocked by seed, unpaired), Holm over the report, and what repeats: auto reached."""

from __future__ import annotations

import pytest

from harness.analysis.speed import auto_note, campaign_speed_tests, interval_widths
from harness.compare.summary import RunSummary
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
