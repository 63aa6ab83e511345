"""harness bench verdicts: the false-alarm rate of every rule stays under the level on exact
candidates drawn from measured distributions, each planted defect is caught, and the rules these
replaced are shown failing on the same draws."""

from __future__ import annotations

import math

import pytest
from cli_testutil import harness

from harness.bench.verdicts import FIXTURE, load_fixture, markdown, run_bench

DRAWS = 100
# The least power each planted defect must have (the README's table gives the measured figures).
POWER = {
    "verdict: a seed-specific failure": 0.8,
    "verdict: broken audio, chaotic video floor": 0.6,
    "verdict: audio 5 ms late": 0.9,
    "verdict: inverted audio": 0.9,
    "verdict: 3% of sharpness lost": 0.9,
    "speed: a kernel 5% faster read 'faster'": 0.9,
}


@pytest.fixture(scope="module")
def bench():
    return run_bench(draws=DRAWS, seed=1)


def test_every_false_alarm_rate_is_under_the_level(bench):
    margin = 3 * math.sqrt(bench.level * (1 - bench.level) / DRAWS)
    alarms = [r for r in bench.rows if r.measure == "false alarm"]
    assert len(alarms) >= 9
    for r in alarms:
        assert r.rate <= bench.level + margin, (r.rule, r.design, r.rate)


def test_every_planted_defect_is_caught(bench):
    power = {(r.rule, r.design): r.rate for r in bench.rows if r.measure == "power"}
    for rule, least in POWER.items():
        rates = [rate for (name, _), rate in power.items() if name == rule]
        assert rates and min(rates) >= least, (rule, rates)
    kernel = {d: rate for (name, d), rate in power.items() if "3x the floor" in name}
    assert kernel[next(d for d in kernel if d.startswith("H200"))] >= 0.9
    assert kernel[next(d for d in kernel if "6 seeds" in d)] >= 0.8  # the builtin's wide floor needs seeds


def test_the_rules_these_replaced_fail_on_the_same_draws(bench):
    old = {(r.rule, r.design): r.old_rule for r in bench.rows if r.old_rule is not None}
    stats29 = [
        v for (rule, design), v in old.items() if rule == "statistics" and design.startswith("29-step")
    ]
    assert min(stats29) > 0.25  # about 38 % and 76 %
    assert old[next(k for k in old if k[0] == "speed word, harness compare of one run a side")] > 0.8
    assert old[next(k for k in old if k[0] == "speed word in a report")] > 0.05


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
