"""``harness bench verdicts``: each verdict rule's false-alarm rate on exact candidates and its power
for planted defects, on seeded campaigns drawn from measured distributions (``verdict_draws``; the
classes that judge one draw for several rows: ``verdict_classes``). The speed rows time identical
kernels with a between-process spread, as a campaign's report tests them (``analysis.speed``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import Field

from harness.analysis.speed import campaign_speed_tests
from harness.analysis.stat_rule import judge_stats
from harness.analysis.verdict import judge_numbers
from harness.bench.verdict_classes import BenchRow, Group, class_groups, full_verdict, run_groups
from harness.bench.verdict_draws import (
    FIXTURE,
    H200,
    SHARPNESS_LOST,
    STATS5,
    Draw,
    builtin_draw,
    floor_energies,
    h200_stated,
    load_fixture,
    parametric_draw,
    pr29_draw,
)
from harness.compare.significance import DIFFERENCE_WORDS
from harness.compare.summary import RunSummary
from harness.records import Record
from harness.rule import welch_p_value
from harness.scenario.verdict import VerdictRules
from harness.text_table import md_rows

# the H200 example's floor: 42.5 dB, SSIM 0.9931, audio 15.3 dB
H200_BASE = floor_energies(42.46, 0.9931, 15.3)


class VerdictBench(Record):
    draws: int
    seed: int
    level: float
    rows: list[BenchRow] = Field(default_factory=list)
    seconds: float = 0.0


def old_stats_rule(d: Draw) -> bool:
    """The rule this replaced: outside min..max of the seed's exact runs widened by 2 % of their mean."""
    for c in d.cand_stats:
        for k in STATS5:
            xs = [e.values[k] for e in d.exact_stats if e.seed == c.seed and e.values.get(k) is not None]
            if xs:
                pad = 0.02 * abs(sum(xs) / len(xs))
                if not min(xs) - pad <= c.values[k] <= max(xs) + pad:
                    return True
    return False


def verdict_outside(d: Draw, rules: VerdictRules) -> bool:
    return full_verdict(d, rules).word == "outside"


def part_outside(part: str) -> Callable[[Draw, VerdictRules], bool]:
    def rule(d: Draw, rules: VerdictRules) -> bool:
        if part == "statistics":
            return judge_stats(d.cand_stats, d.exact_stats, rules).word == "outside"
        v = judge_numbers("c", d.cands, d.floors, rules=rules)
        outside = any(r.word == "outside" for r in v.energy if r.metric.startswith(part))
        return outside or (part == "audio" and bool(v.audio_lag))

    return rule


def run_bench(draws: int = 500, seed: int = 0, fixture: Path = FIXTURE,
              rules: VerdictRules | None = None) -> VerdictBench:  # fmt: skip
    """Every row on ``draws`` seeded draws each."""
    t0 = time.perf_counter()
    rules = rules or VerdictRules()
    fx = load_fixture(fixture)
    out = VerdictBench(draws=draws, seed=seed, level=rules.alpha)
    b3 = "builtin, 3 seeds x 3 floor runs (resampled)"
    h1 = "H200 spreads, 1 seed x 1 floor run (the 3-step design; the H200 spreads stated)"
    stated = h200_stated(rules)  # one floor run per seed: no interval unless a spread is stated
    h3 = "H200 spreads, 3 seeds x 3 floor runs"
    rows: list[tuple[str, str, str, Callable, Callable | None]] = [
        ("verdict (any part outside)", b3, "false alarm", lambda r: builtin_draw(fx, r), verdict_outside),
        ("video energy", b3, "false alarm", lambda r: builtin_draw(fx, r), part_outside("video")),
        ("audio energy and lag", b3, "false alarm", lambda r: builtin_draw(fx, r), part_outside("audio")),
        ("statistics", b3, "false alarm", lambda r: builtin_draw(fx, r), part_outside("statistics")),
        ("verdict (any part outside)", h1, "false alarm",
         lambda r: parametric_draw(r, seeds=1, floor_runs=1, base=H200_BASE, sd=H200),
         lambda d, _: verdict_outside(d, stated)),
        ("verdict (any part outside)", h3, "false alarm",
         lambda r: parametric_draw(r, seeds=3, floor_runs=3, base=H200_BASE, sd=H200), verdict_outside),
        ("statistics", "29-step spreads, 1 seed x 2 exact runs", "false alarm", lambda r: pr29_draw(r, 1),
         part_outside("statistics")),
        ("statistics", "29-step spreads, 3 seeds x 2 exact runs", "false alarm", lambda r: pr29_draw(r, 3),
         part_outside("statistics")),
        ("verdict: a seed-specific failure", b3, "power", lambda r: builtin_draw(fx, r, "seed_specific"),
         verdict_outside),
        ("verdict: broken audio, chaotic video floor", "29-step design, 1 seed (the H200 spreads stated)", "power",
         lambda r: pr29_draw(r, 1, "broken_audio"), lambda d, _: verdict_outside(d, stated)),
        ("verdict: audio 5 ms late", b3, "power", lambda r: builtin_draw(fx, r, "delayed_audio"), verdict_outside),
        ("verdict: inverted audio", b3, "power", lambda r: builtin_draw(fx, r, "inverted_audio"), verdict_outside),
        (f"verdict: {100 * SHARPNESS_LOST:g}% of sharpness lost", b3, "power",
         lambda r: builtin_draw(fx, r, "sharpness"), verdict_outside),
        ("verdict: a kernel at 3x the floor's energy", b3, "power", lambda r: builtin_draw(fx, r, "kernel_3x"),
         verdict_outside),
        ("verdict: a kernel at 3x the floor's energy", b3.replace("3 seeds", "6 seeds"), "power",
         lambda r: builtin_draw(fx, r, "kernel_3x", seeds=6), verdict_outside),
        ("verdict: a kernel at 3x the floor's energy", h3, "power",
         lambda r: parametric_draw(r, seeds=3, floor_runs=3, base=H200_BASE, sd=H200, defect="kernel_3x"),
         verdict_outside),
    ]  # fmt: skip
    # each row a group of its own, read by one row (its judgement), on the stream of its place
    singles = [Group(design, draw, [(rule, measure, lambda d, hit: hit)], judge=judge,
                     old=old_stats_rule if rule == "statistics" else None)
               for rule, design, measure, draw, judge in rows]  # fmt: skip
    out.rows += run_groups(singles, draws, seed, rules, stream=0)
    out.rows += run_groups(class_groups(fx), draws, seed, rules)
    out.rows += speed_rows(draws, seed, rules)
    out.seconds = time.perf_counter() - t0
    return out


def markdown(b: VerdictBench) -> str:
    head = ["rule", "design", "measure", "rate", "the rule it replaced"]
    rows = [
        [r.rule, r.design, r.measure, *("" if x is None else f"{100 * x:.1f}%" for x in (r.rate, r.old_rule))]
        for r in b.rows
    ]
    closing = (
        f"{b.draws} draws per row (seed {b.seed}), level {b.level:g}: a false-alarm rate should be at or under it; "
        f"{b.seconds:.1f} s"
    )
    return "\n".join([*md_rows(head, rows), "", closing]) + "\n"


SPREAD = 0.01  # between-process sd of a run's time (the simulation)
STEP_SPREAD = 0.002  # steps inside one process
DRIFT = 0.005  # a round's shared drift (interleaved rounds: every arm sees it)
STEPS = 28  # steps 2..29 of a 29-step run
DRIFT_PER_RUN = 0.01  # each run this much slower than the one before it (a machine warming up)


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


def _drifted(noise: np.ndarray, alternate: bool) -> list[RunSummary]:
    """An exact twin and the reference, 2 seeds x 4 repeats run in the plan's order (``alternate``:
    each round in the reverse order of the one before; else the reference first in every round),
    each run DRIFT_PER_RUN slower than the one before, ``noise`` its log time's own."""
    runs: list[RunSummary] = []
    for rep in range(1, 5):
        for s in range(2):
            for arm in ("twin", "ref") if alternate and rep % 2 == 0 else ("ref", "twin"):
                t = 0.45 * (1 + DRIFT_PER_RUN) ** len(runs) * math.exp(noise[len(runs)])
                runs.append(RunSummary(key=f"{arm}@{s}~r{rep}", path="", arm=arm, seed=s, repeat=rep,
                                       role="reference" if arm == "ref" else "candidate", status="ok",
                                       s_per_step=t, pipeline_total_s=6.7 * t))  # fmt: skip
    return runs


def _old_any_word(runs: list[RunSummary], alpha: float) -> bool:
    ref = [r for r in runs if r.arm == "ref"]
    for arm in sorted({r.arm for r in runs} - {"ref"}):
        mine = [r for r in runs if r.arm == arm]
        for t in ("s_per_step", "pipeline_total_s"):
            if welch_p_value([getattr(r, t) for r in ref], [getattr(r, t) for r in mine]) < alpha:
                return True
    return False


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
    rng = np.random.default_rng([seed, 103])
    hits = old = 0
    for _ in range(draws):  # the same draws in both orders: the rule it replaced ran the reference first
        noise = rng.normal(0, SPREAD, 16)
        now, before = (campaign_speed_tests(_drifted(noise, alternate), "ref", rules)["twin"]["s_per_step"].word
                       for alternate in (True, False))  # fmt: skip
        hits, old = hits + (now in DIFFERENCE_WORDS), old + (before in DIFFERENCE_WORDS)
    rows.append(BenchRow(rule="speed word: an exact twin, rounds in alternating order", design="1 twin, 2 seeds x 4 "
                         f"repeats, each run {DRIFT_PER_RUN:.0%} slower than the one before", measure="false alarm",
                         rate=hits / draws, draws=draws, old_rule=old / draws))  # fmt: skip
    return rows
