"""harness bench verdicts: the false-alarm rate of every rule stays under the level on exact
candidates drawn from measured distributions, each planted defect is caught, and the rules these
replaced are shown failing on the same draws."""

from __future__ import annotations

import pytest
from cli_testutil import harness

from harness.bench.verdicts import FIXTURE, load_fixture, markdown, run_bench

DRAWS = 60  # the CLI's default is 500; every row's draws are seeded
# The least power each planted defect must have (docs/verdicts.md's table gives the measured figures).
POWER = {
    "verdict: a seed-specific failure": 0.8,
    "verdict: broken audio, chaotic video floor": 0.6,
    "verdict: audio 5 ms late": 0.9,
    "verdict: inverted audio": 0.9,
    "verdict: 3% of sharpness lost": 0.9,
    "speed: a kernel 5% faster read 'faster'": 0.9,
}
# The classes of harness.bench.verdict_classes: where the rule is deterministic, every draw.
CLASS_POWER = {
    "verdict: identical on one seed read identical there (and the rest judged)": 1.0,
    "verdict: identical on every seed read 'identical'": 1.0,
    "verdict: NaN in situ (one call non-finite)": 1.0,
    "verdict: one frozen frame": 1.0,
    "verdict: audio 20 ms late on one seed": 1.0,
    "structure: layout mirrored left-right": 0.95,
    "verdict: identical on one seed, a quantised kernel on the others": 0.95,
    "floor check: a floor arm replaced by a kernel's output named": 0.95,
    "floor check: two equal floor runs counted once": 1.0,
    "verdict: one call of 24 at rel L1 0.3 in situ": 1.0,
    "structure: video played backwards": 0.95,
    "structure: hue turned 90 degrees": 0.95,
    "structure: U and V swapped": 0.7,  # a cell whose Cb and Cr are alike changes little
}
NEW_ALARMS = (
    "verdict: identical on one seed",
    "verdict, a broken floor run",
    "verdict with an in-situ reading",
    "verdict: a candidate lagging 1-2 samples",
    "structure: layout",
    "floor check: an intact floor of two runs called invalid",
    "verdict, two floor runs a seed",
    "verdict, a floor arm replaced by a kernel's output",
    "verdict, two floor runs equal",
    "structure: colour and time order",
    "speed word: an exact twin, rounds in alternating order",
)


@pytest.fixture(scope="module")
def bench():
    return run_bench(draws=DRAWS, seed=1)


def test_every_false_alarm_rate_is_under_the_level(bench):
    alarms = [r for r in bench.rows if r.measure == "false alarm"]
    assert len(alarms) >= 9
    for r in alarms:
        assert r.rate <= bench.level, (r.rule, r.design, r.rate)


def test_every_planted_defect_is_caught(bench):
    power = {(r.rule, r.design): r.rate for r in bench.rows if r.measure == "power"}
    for rule, least in POWER.items():
        rates = [rate for (name, _), rate in power.items() if name == rule]
        assert rates and min(rates) >= least, (rule, rates)
    kernel = {
        d: rate for (name, d), rate in power.items() if name == "verdict: a kernel at 3x the floor's energy"
    }
    assert kernel[next(d for d in kernel if d.startswith("H200"))] >= 0.9
    assert kernel[next(d for d in kernel if "6 seeds" in d)] >= 0.8  # the builtin's wide floor needs seeds


def test_the_new_classes_never_cry_wolf_and_catch_their_defect(bench):
    alarms = {(r.rule, r.design): r.rate for r in bench.rows if r.measure == "false alarm"}
    for rule in NEW_ALARMS:
        rates = [rate for (name, _), rate in alarms.items() if name == rule]
        assert rates and max(rates) <= bench.level, (rule, rates)
    power = {(r.rule, r.design): r.rate for r in bench.rows if r.measure == "power"}
    for rule, least in CLASS_POWER.items():
        rates = [rate for (name, _), rate in power.items() if name == rule]
        assert rates and min(rates) >= least, (rule, rates)
    broken = {d.split("one floor run replaced by ")[1]: rate for (name, d), rate in power.items()
              if name == "floor check: the broken floor run left out"}  # fmt: skip
    caught = {d.split("one floor run replaced by ")[1]: rate for (name, d), rate in power.items()
              if name.startswith("verdict: a kernel at 3x") and "broken floor" in name}  # fmt: skip
    other, kernel = "another seed's output", "sage_emul_aiter's"
    assert broken[other] >= 0.95 and caught[other] >= 0.9
    # A quantised kernel's run in the floor of seed 42 or 44 (whose exact runs' audio spreads from 20 to
    # 42 dB) can make the floor check leave out an exact run (the largest audio factor) and then find
    # the two left disagreeing: the seed's floor invalid, the verdict incomplete (about 85 % left out).
    assert broken[kernel] >= 0.7 and caught[kernel] >= 0.85


def test_a_verdict_on_identical_seeds_names_them_and_a_broken_floor_run_is_named():
    import numpy as np

    from harness.bench.verdict_classes import broken_floor_draw, full_verdict, identical_draw
    from harness.scenario.verdict import VerdictRules

    fx, rules = load_fixture(FIXTURE), VerdictRules()
    d = identical_draw(fx, np.random.default_rng(3), every=False)
    v = full_verdict(d, rules)
    assert v.identical_seeds == d.marks["identical"] and v.word in ("within", "inconclusive", "incomplete")
    assert v.text.startswith(f"{v.word}: identical on seed(s) {d.marks['identical'][0]}")
    d = broken_floor_draw(fx, np.random.default_rng(3), "seed")
    v = full_verdict(d, rules)
    assert v.floor_check is not None and any(d.marks["broken"] in f for f in v.floor_check.findings)
    assert f"floor run(s) left out: {d.marks['broken']}" in v.text


def test_the_rules_these_replaced_fail_on_the_same_draws(bench):
    old = {(r.rule, r.design): r.old_rule for r in bench.rows if r.old_rule is not None}
    stats29 = [
        v for (rule, design), v in old.items() if rule == "statistics" and design.startswith("29-step")
    ]
    assert min(stats29) > 0.25  # about 38 % and 76 %
    assert old[next(k for k in old if k[0] == "speed word, harness compare of one run a side")] > 0.8
    assert old[next(k for k in old if k[0] == "speed word in a report")] > 0.05
    # an exact twin under a drift along the run order, the reference first in every round: about 30 %
    assert (
        old[next(k for k in old if k[0] == "speed word: an exact twin, rounds in alternating order")] > 0.15
    )


def test_the_fixture_says_how_it_was_made_and_the_cli_prints_the_table(bench):
    fx = load_fixture(FIXTURE)
    assert fx.commands[0] == "harness run scenarios/verdict_calibration.yaml" and len(fx.seeds) == 6
    assert all(len(s.floors) == 5 and set(s.defects) >= {"inverted_audio", "delayed_audio"} for s in fx.seeds)
    table = markdown(bench)
    assert table.startswith("| rule | design | measure | rate | the rule it replaced |")
    res = harness("bench", "verdicts", "--draws", "10")
    assert res.returncode == 0, res.stderr
    assert "| verdict (any part outside) |" in res.stdout and "10 draws per row (seed 0)" in res.stdout
    bad = harness("bench", "verdicts", "--write", "x.json")
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --write: only with --measure"
