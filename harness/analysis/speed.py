"""The speed tests of one campaign: each arm against the reference (``compare.significance``), Holm within one
family of arms only (``speed_families``: floors, schedules and shadowed copies neither dilute nor lend
power to the candidates' words); the stopping rule of ``repeats: auto``; and the per-arm aggregates (speed
over every run, accuracy and statistics over the seeds' first repeats) with why a timing is no baseline."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from harness.analysis.model import ArmAggregate, Spread
from harness.compare.pairwise import Comparison
from harness.compare.significance import (
    SpeedTest,
    compare_blocked,
    compare_pairs,
    compare_samples,
    holm_tests,
)
from harness.compare.summary import RunSummary, stat_fields
from harness.metrics.metric import accuracy_metrics
from harness.number_format import percent_text
from harness.run_keys import sample_key
from harness.scenario.verdict import VerdictRules

TIMINGS = {"s_per_step": "DiT s/step", "pipeline_total_s": "pipeline total"}
ROLE_FAMILIES = {"candidate": "candidates", "noise_floor": "noise floors", "reference": "reference"}
SCHEDULES, SHADOWED_COPIES = "schedules", "shadowed copies"


def speed_families(roles: Mapping[str, str], *, schedules: Iterable[str] = (),
                   shadowed_copies: Iterable[str] = ()) -> dict[str, str]:  # fmt: skip
    """arm -> Holm family: ``schedules``, ``shadowed copies`` of the reference, any other by its role."""
    out = {arm: ROLE_FAMILIES.get(role, role) for arm, role in roles.items()}
    out.update(dict.fromkeys((a for a in schedules if a in roles), SCHEDULES))
    out.update(dict.fromkeys((a for a in shadowed_copies if a in roles), SHADOWED_COPIES))
    return out


def run_places(runs: Sequence[RunSummary]) -> dict[str, int]:
    """key -> the run's place in its round (its seed's runs of one repeat), in the order listed: the
    plan's, which campaign.json keeps and the local executor runs."""
    counters: defaultdict[tuple, itertools.count] = defaultdict(itertools.count)
    return {r.key: next(counters[(r.seed, r.repeat)]) for r in runs}


def load_note(runs: Sequence[RunSummary]) -> str:
    """'machine busy during 4 of 6 runs (load 3.1 on 2 cores): timings noisy', or '' (none busy or recorded)."""
    loads = [r.load for r in runs if r.ok and r.load is not None]
    busy = [(x.other_cpu_percent or 0, x.loadavg_1m[:1], why) for x in loads if (why := x.busy())]
    if not busy:
        return ""
    return f"machine busy during {len(busy)} of {len(loads)} runs ({max(busy)[2]}): timings noisy"


def speed_test(arm_runs: Sequence[RunSummary], ref_runs: Sequence[RunSummary], timing: str,
               rules: VerdictRules, places: Mapping[str, int] | None = None) -> SpeedTest:  # fmt: skip
    """One timing of an arm against the reference, in the design its runs allow; ``places``: each run's
    place in its round (``run_places``), for the run order's check of paired runs."""

    def measured(runs: Sequence[RunSummary]) -> list[tuple]:  # (seed, repeat, time, key) of every ok run
        return [(r.seed, r.repeat, v, r.key) for r in runs if r.ok and (v := getattr(r, timing)) is not None]

    arm, ref, at = measured(arm_runs), measured(ref_runs), places or {}
    what, kw = TIMINGS[timing], {"alpha": rules.alpha, "min_effect": rules.min_effect}
    kw["machine"] = load_note([*ref_runs, *arm_runs])
    ref_at, arm_at = {(s, k): (v, key) for s, k, v, key in ref}, {(s, k): (v, key) for s, k, v, key in arm}
    if len(arm_at) >= 2 and set(arm_at) == set(ref_at):
        pairs = sorted(arm_at, key=str)
        gaps = [
            at[arm_at[k][1]] - at[ref_at[k][1]] for k in pairs if arm_at[k][1] in at and ref_at[k][1] in at
        ]
        return compare_pairs([(ref_at[k][0], arm_at[k][0]) for k in pairs], what=what, offsets=gaps, **kw)
    seeds = sorted({x[0] for x in arm} & {x[0] for x in ref}, key=str)
    if seeds and None not in seeds:
        blocks = [([v for s, _, v, _ in ref if s == b], [v for s, _, v, _ in arm if s == b]) for b in seeds]
        blocked = compare_blocked(blocks, what=what, **kw)
        if blocked.speedup_ci is not None:  # no within-seed df, or zero spread within seeds: unpaired
            return blocked
    return compare_samples([x[2] for x in ref], [x[2] for x in arm], what=what, **kw)


def campaign_speed_tests(runs: Sequence[RunSummary], reference_arm: str | None, rules: VerdictRules,
                         families: Mapping[str, str] | None = None) -> dict[str, dict[str, SpeedTest]]:  # fmt: skip
    """arm -> timing -> test, for every arm but the reference; Holm within each family of arms."""
    out: dict[str, dict[str, SpeedTest]] = {}
    if reference_arm is None:
        return out
    family = speed_families({r.arm: r.role for r in runs}) | dict(families or {})
    ref, places = [r for r in runs if r.arm == reference_arm], run_places(runs)
    for arm in dict.fromkeys(r.arm for r in runs):
        if arm == reference_arm:
            continue
        arm_runs = [r for r in runs if r.arm == arm]
        out[arm] = {t: speed_test(arm_runs, ref, t, rules, places) for t in TIMINGS}
    for name in dict.fromkeys(family[a] for a in out):
        holm_tests([t for a, tests in out.items() if family[a] == name for t in tests.values()], name)
    return out


def interval_widths(tests: dict[str, dict[str, SpeedTest]], roles: dict[str, str]) -> dict[str, float | None]:
    """'arm timing' -> the candidates' speed-up interval's relative width (None: none; 0: zero spread)."""
    out: dict[str, float | None] = {}
    for arm, by in tests.items():
        if roles.get(arm) != "candidate":
            continue
        for timing, t in by.items():
            if t.n_arm:  # else never ran here (skipped): nothing to narrow
                ci, s = t.speedup_ci, t.speedup
                width = (ci[1] - ci[0]) / s if ci and s else None
                out[f"{arm} {TIMINGS[timing]}"] = 0.0 if t.word == "zero spread" else width
    return out


def auto_note(tests: dict[str, dict[str, SpeedTest]], roles: dict[str, str], repeats: int, target: float,
              most: int) -> str:  # fmt: skip
    """What ``repeats: auto`` reached: every candidate's interval under the target, or the widest."""
    widths = interval_widths(tests, roles)
    wide = {k: w for k, w in widths.items() if w is None or w >= target}
    if not wide:
        cands = [t for a, by in tests.items() if roles.get(a) == "candidate" for t in by.values()]
        flat = sum(t.word == "zero spread" for t in cands)
        zero = f" ({flat} with zero spread: no interval, nothing to narrow)" if flat else ""
        return f"repeats auto: {repeats} round(s); every speed-up interval is narrower than {100 * target:g}%{zero}"
    k = max(wide, key=lambda x: wide[x] if wide[x] is not None else float("inf"))
    shown = "no interval" if wide[k] is None else f"{percent_text(wide[k])} wide"
    return (
        f"repeats auto: {repeats} round(s) of at most {most}; {k} is {shown}, not under the target "
        f"{100 * target:g}%"
    )


def spread(values: list[float | None]) -> Spread:
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return Spread(n=0)
    finite = [v for v in vals if math.isfinite(v)]
    s = Spread(n=len(vals), values=vals, min=min(vals), max=max(vals))
    all_finite = len(finite) == len(vals)
    s.mean = statistics.fmean(vals) if all_finite else (math.inf if max(vals) == math.inf else None)
    s.std = statistics.stdev(vals) if all_finite and len(vals) > 1 else None
    return s


def aggregate_metrics(arm_runs: list[RunSummary], cmps: list[Comparison]) -> dict[str, Spread]:
    """Speed over every run of the arm (repeats x seeds); accuracy and statistics over seeds."""
    m: dict[str, Spread] = {
        "s_per_step": spread([r.s_per_step for r in arm_runs]),
        **{f"step_{i}": spread([r.step(i) for r in arm_runs]) for i in (1, 2, 3)},
        "pipeline_total_s": spread([r.pipeline_total_s for r in arm_runs]),
        "dit_steps": spread([r.dit_steps for r in arm_runs]),
    }
    timed = [r.layers for r in arm_runs if r.ok and r.layers is not None]
    for name in ("layer_s", "outside_layers_s", "released_step_s") if timed else ():  # released: extrapolated
        m[name] = spread([getattr(t, name) for t in timed])
    if cmps:
        for metric in accuracy_metrics():
            m[metric.key] = spread([metric.get(c) for c in cmps])
        m["identical_frames"] = spread([c.video.identical_frames if c.video else None for c in cmps])
    for name in stat_fields(None):
        m[name] = spread([stat_fields(r.stats)[name] for r in arm_runs if r.repeat == 1])
    return m


def timing_note(r: RunSummary) -> str:
    """Why an arm's timings are no baseline (empty when they are one)."""
    bits = r.timing_notes(noise_floor=r.role == "noise_floor")
    # run.json says it; older records ask the registry (which imports torch: about 0.6 GB)
    from harness.executors.process import emulated_backend

    if r.emulated if r.emulated is not None else r.attn_type and emulated_backend(r.attn_type):
        bits.append("a numerics model in PyTorch, not a kernel")
    return "; ".join(bits)


def arm_aggregates(
    runs: list[RunSummary],
    comparisons: list[Comparison],
    reference_arm: str | None,
    rules: VerdictRules,
    families: Mapping[str, str] | None = None,
) -> list[ArmAggregate]:
    """One aggregate per arm, in order; ``families``: arm -> the Holm family of its speed tests."""
    out = []
    tests = campaign_speed_tests(runs, reference_arm, rules, families=families)
    for arm in dict.fromkeys(r.arm for r in runs):
        arm_runs = [r for r in runs if r.arm == arm]
        first = arm_runs[0]
        agg = ArmAggregate(
            **first.model_dump(include={"arm", "role", "attn_type", "kv_reversed"}),
            perturbation=first.perturbation,
            keys=[r.key for r in arm_runs],
            seeds=sorted({r.seed for r in arm_runs if r.seed is not None}, key=sample_key),
            repeats=max(r.repeat for r in arm_runs),
            runs_ok=sum(r.ok for r in arm_runs),
            metrics=aggregate_metrics(arm_runs, [c for c in comparisons if c.b.arm == arm]),
            timing_note=timing_note(first),
        )
        agg.timing_baseline = not agg.timing_note
        timed = next((r.layers for r in arm_runs if r.ok and r.layers is not None), None)
        if timed is not None:
            agg.layers_timed, agg.layer_seq_len = timed.layers, timed.seq_len
            agg.released_layers = timed.released_layers
        if agg.timing_note:
            agg.timing_label = (
                "not a timing baseline" if first.role == "noise_floor" else "an emulator's timing"
            )
        agg.speed = tests.get(arm, {})
        out.append(agg)
    return out


def repeat_notes(runs: list[RunSummary]) -> list[str]:
    """Are the outputs of an arm's repeats byte-identical (a deterministic pipeline and kernel)?"""
    notes = []
    groups: dict[tuple[str, int | None], list[RunSummary]] = {}
    for r in runs:
        if r.ok and r.output_sha256:
            groups.setdefault((r.arm, r.seed), []).append(r)
    for (arm, seed), group in groups.items():
        if len(group) < 2:
            continue
        where = f"{arm}{f' seed {seed}' if seed is not None else ''}"
        what = "differs between repeats (run-to-run nondeterminism)"
        if len({r.output_sha256 for r in group}) == 1:
            what = "byte-identical in every repeat"
        notes.append(f"{where}: {len(group)} runs, output.mp4 {what}")
    return notes
