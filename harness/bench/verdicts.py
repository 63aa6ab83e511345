"""``harness bench verdicts``: how often each verdict rule cries wolf, and how often it catches a
planted defect, on campaigns drawn from measured distributions (seeded, reproducible).

Two sources of draws:

* **builtin, resampled**: the committed fixture (``verdict_fixture``: real builtin runs over six
  seeds, five exact perturbations each, three approximate kernels, defects planted in each
  seed's reference output). A drawn campaign takes 3 of the 6 seeds; in each, the floor is the
  three perturbations ``scenarios/e2e_3step.yaml`` runs (K/V reversed, K/V in 2 chunks, the math
  kernel) and an exact candidate is one of the two other exact computations (K/V in 3 chunks,
  reversed and in 2 chunks), as exact as the floor; a defect replaces the parts it breaks with that
  seed's measured defect (its audio metrics, a residual lag) or scales them (statistics by the
  defect's ratio to an unchanged re-encode; energies by a factor);
* **parametric**: log-normal energies and normal statistics with the spreads measured elsewhere:
  the H200 example (three seeds x three exact perturbations, bf16) and the pull request's five
  29-step runs (their statistics; one floor run at 14.64 dB, audio 9.16 dB). A design with one
  floor run per seed states the spreads it draws with (``h200_stated``: the H200 example's, named
  as the source), as its scenario would have to: without a stated spread such a reading has no
  interval.

The classes that came with the word "identical", the floor check, the lag judged against the
floor's lags, the count rule without allowance, the in-situ reading in every regime and the layout
check (``analysis.structure``) are groups of rows in ``verdict_classes``: one draw judged once,
read by each of its rows.

Each row is one rule on one design: the **false-alarm rate** of exact candidates (the rule says
outside, or a speed word for identical kernels) or the **power** for a planted defect (the rule
says outside). ``run_bench`` returns the rows; ``markdown`` lays them out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from harness.analysis.stat_rule import judge_stats
from harness.analysis.verdict import judge_numbers
from harness.bench.verdict_classes import Group, class_groups, full_verdict, run_groups
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
from harness.bench.verdict_speed import BenchRow, speed_rows
from harness.records import Record
from harness.scenario.verdict import VerdictRules
from harness.text_table import md_rows


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
    """Every row (module docstring) on ``draws`` seeded draws each."""
    import time

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
         lambda r: parametric_draw(r, seeds=1, floor_runs=1, base=_h200_base(), sd=H200),
         lambda d, _: verdict_outside(d, stated)),
        ("verdict (any part outside)", h3, "false alarm",
         lambda r: parametric_draw(r, seeds=3, floor_runs=3, base=_h200_base(), sd=H200), verdict_outside),
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
         lambda r: parametric_draw(r, seeds=3, floor_runs=3, base=_h200_base(), sd=H200, defect="kernel_3x"),
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


def _h200_base() -> dict[str, float]:
    """The H200 example's floor energies: 42.5 dB, SSIM 0.9931, audio 15.3 dB."""
    return floor_energies(42.46, 0.9931, 15.3)


def markdown(b: VerdictBench) -> str:
    head = ["rule", "design", "measure", "rate", "the rule it replaced"]
    rows = [
        [
            r.rule,
            r.design,
            r.measure,
            f"{100 * r.rate:.1f}%",
            "" if r.old_rule is None else f"{100 * r.old_rule:.1f}%",
        ]
        for r in b.rows
    ]
    closing = (
        f"{b.draws} draws per row (seed {b.seed}), level {b.level:g}: a false-alarm rate should be at or under it; "
        f"{b.seconds:.1f} s"
    )
    return "\n".join([*md_rows(head, rows), "", closing]) + "\n"
