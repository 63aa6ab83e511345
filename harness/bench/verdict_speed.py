"""The speed rows of ``harness bench verdicts``: identical kernels timed with a between-process
spread, as a campaign's report tests them (``analysis.speed``: runs as samples, paired, Holm)
and as the rules they replaced did (Welch over runs at alpha without correction; Welch over the
steps of one run a side)."""

from __future__ import annotations

import numpy as np

from harness.analysis.speed import campaign_speed_tests
from harness.compare.summary import RunSummary
from harness.records import Record
from harness.rule import welch_p_value
from harness.scenario.verdict import VerdictRules

SPREAD = 0.01  # between-process sd of a run's time (the simulation)
STEP_SPREAD = 0.002  # steps inside one process
DRIFT = 0.005  # a round's shared drift (interleaved rounds: every arm sees it)
STEPS = 28  # steps 2..29 of a 29-step run


def _campaign(rng, candidates: int, seeds: int, repeats: int, faster: float = 1.0) -> list[RunSummary]:
    runs = []
    arms = ["ref"] + [f"k{i}" for i in range(candidates)]
    for rep in range(1, repeats + 1):
        for s in range(seeds):
            drift = rng.normal(0, DRIFT)
            for arm in arms:
                k = 1.0 if arm in ("ref",) else 1.0 / faster
                step = 0.45 * k * np.exp(drift + rng.normal(0, SPREAD))
                total = 3.0 * k * np.exp(drift + rng.normal(0, SPREAD))
                runs.append(RunSummary(key=f"{arm}@{s}~r{rep}", path="", arm=arm, seed=s, repeat=rep,
                                       role="reference" if arm == "ref" else "candidate", status="ok",
                                       s_per_step=float(step), pipeline_total_s=float(total)))  # fmt: skip
    return runs


def _old_any_word(runs: list[RunSummary], alpha: float) -> bool:
    ref = [r for r in runs if r.arm == "ref"]
    for arm in sorted({r.arm for r in runs} - {"ref"}):
        mine = [r for r in runs if r.arm == arm]
        for t in ("s_per_step", "pipeline_total_s"):
            if welch_p_value([getattr(r, t) for r in ref], [getattr(r, t) for r in mine]) < alpha:
                return True
    return False


class BenchRow(Record):
    """One row of ``harness bench verdicts``: a rule on a design, and how often it fired."""

    rule: str
    design: str
    measure: str  # false alarm | power
    rate: float
    draws: int
    old_rule: float | None = None  # the rule this replaced, on the same draws
    note: str = ""


def speed_rows(draws: int, seed: int, rules: VerdictRules) -> list[BenchRow]:
    rows = []
    design = "3 identical candidates x 2 timings, 3 seeds x 3 repeats, 1% between runs"
    rng = np.random.default_rng([seed, 100])
    hits = old = 0
    for _ in range(draws):
        runs = _campaign(rng, 3, 3, 3)
        tests = campaign_speed_tests(runs, "ref", rules)
        hits += any(t.significant for by in tests.values() for t in by.values())
        old += _old_any_word(runs, rules.alpha)
    rows.append(BenchRow(rule="speed word in a report", design=design, measure="false alarm", rate=hits / draws,
                         draws=draws, old_rule=old / draws))  # fmt: skip
    rng = np.random.default_rng([seed, 101])
    old = 0
    for _ in range(draws):  # one run a side: the old rule tested its steps as samples
        a = 0.45 * np.exp(rng.normal(0, SPREAD) + rng.normal(0, STEP_SPREAD, STEPS))
        b = 0.45 * np.exp(rng.normal(0, SPREAD) + rng.normal(0, STEP_SPREAD, STEPS))
        old += welch_p_value(list(a), list(b)) < rules.alpha
    rows.append(BenchRow(rule="speed word, harness compare of one run a side", design="identical kernels, "
                         "1% between runs, 0.2% between steps", measure="false alarm", rate=0.0, draws=draws,
                         old_rule=old / draws, note="one run a side never gets a speed word"))  # fmt: skip
    rng = np.random.default_rng([seed, 102])
    hits = 0
    for _ in range(draws):
        tests = campaign_speed_tests(_campaign(rng, 1, 3, 3, faster=1.05), "ref", rules)
        hits += tests["k0"]["s_per_step"].word == "faster"
    rows.append(BenchRow(rule="speed: a kernel 5% faster read 'faster'", design="1 candidate, 3 seeds x 3 "
                         "repeats, 1% between runs", measure="power", rate=hits / draws, draws=draws))  # fmt: skip
    return rows
