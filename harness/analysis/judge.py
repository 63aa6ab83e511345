"""A candidate's verdict read off its comparisons (``verdict.judge_numbers`` on their numbers), plus what its
runs say of themselves (not run, not measured, attention invalid)."""

from __future__ import annotations

from harness.analysis.energy import PairErrors
from harness.analysis.structure import FrameCounts
from harness.analysis.verdict import (
    InsituReading,
    Verdict,
    attention_verdict,
    judge_numbers,
    settle,
    stats_sample,
)
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary
from harness.scenario.verdict import VerdictRules


def did_it_run(v: Verdict, measured: list[Comparison], runs: list[RunSummary]) -> str:
    """A warning when an arm not on the reference's backend gives its output bit for bit: did it run?"""
    ident = [c for c in measured if c.b.seed in v.identical_seeds]
    if not ident:
        return ""
    ref_type, own = ident[0].a.attn_type, ident[0].b.attn_type
    if own is None or own == ref_type or ident[0].b.perturbation:
        return ""  # the reference's own backend (a shadowed copy, a schedule on its exact steps)
    counted = [r.attn.calls_requested for r in runs if r.ok and r.attn is not None]
    if not counted:
        calls = "no call counts were recorded to tell whether it was reached"
    elif sum(counted) == 0:
        calls = f"the counts show no call served by {own}: it did not run"
    else:
        calls = f"{sum(counted)} call(s) were counted as served by {own}: check that the op computes"
    seeds = ", ".join(str(c.b.seed) for c in ident)
    return (
        f"{own} is not the reference's backend ({ref_type}), yet its output is bitwise the reference's on seed(s) "
        f"{seeds}: its kernel may not have run; {calls}"
    )


def judge(
    arm: str,
    cands: list[Comparison],
    floors: list[Comparison],
    *,
    runs: list[RunSummary] | None = None,
    rules: VerdictRules | None = None,
    baseline: list[Comparison] | None = None,
    insitu: InsituReading | None = None,
) -> Verdict:
    """Verdict for one arm from its comparisons, the floors', the baseline's and its runs."""
    rules = rules or VerdictRules()
    runs = runs if runs is not None else [c.b for c in cands]
    measured = [c for c in cands if c.measured]
    floor_ok = [f for f in floors if f.measured]
    exact = {r.key: r for r in [*(c.a for c in measured), *(f.b for f in floor_ok)] if r.stats is not None}
    v = judge_numbers(
        arm,
        [PairErrors.from_comparison(c) for c in measured],
        [PairErrors.from_comparison(f) for f in floor_ok],
        cand_stats=[stats_sample(c.b) for c in measured if c.b.stats is not None],
        exact_stats=[stats_sample(r) for r in exact.values()],
        rules=rules,
        baseline=[PairErrors.from_comparison(b) for b in baseline or [] if b.measured],
        insitu=insitu,
        cand_frames=[FrameCounts.of(c.b) for c in measured if c.b.stats is not None],
        exact_frames=[FrameCounts.of(r) for r in exact.values()],
    )
    v.role = runs[0].role if runs else "candidate"
    v.keys = [r.key for r in runs if r.repeat == 1] or v.keys
    v.seeds = sorted({r.seed for r in runs if r.seed is not None})
    head: list[str] = []
    by_reason: dict[tuple[str, str | None], list[str]] = {}
    for r in runs:
        if not r.ok:
            by_reason.setdefault((r.status, r.reason), []).append(r.key)
    for (status, reason), keys in by_reason.items():
        who = keys[0] if len(keys) == 1 else f"{len(keys)} runs ({', '.join(keys)})"
        head.append(f"{who} not measured: status {status}" + (f" ({reason})" if reason else ""))
    for c in cands:
        if c.b.ok and not c.measured:
            head.append(f"{c.b.key}: " + "; ".join(c.notes or ["not measured"]))
    primary_seeds = {r.seed for r in runs if r.repeat == 1 and r.ok}
    unmeasured = sorted(s for s in primary_seeds if s not in {c.b.seed for c in measured})
    v.sentences = head + v.sentences
    v.attention_ok, v.attention = attention_verdict(runs)
    v.sentences.append(f"attention: {v.attention}")
    warning = did_it_run(v, measured, runs)
    if warning:
        v.warnings.append(warning)
        v.sentences.insert(0, warning)
    settle(v, runs, measured=bool(measured), unmeasured=unmeasured, head=head)
    v.accuracy = v.text
    attn = {True: "attention valid", False: "attention INVALID", None: "attention not verified"}
    v.summary = f"{v.text}; {attn[v.attention_ok]}"
    return v
