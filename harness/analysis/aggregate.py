"""Per-arm aggregates: speed over every run (tested by ``analysis.speed``), accuracy and statistics over
the seeds' first repeats, each spread with its values and n; and why an arm's timing is no baseline."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from harness.analysis.model import ArmAggregate, Spread
from harness.analysis.speed import campaign_speed_tests
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary, stat_fields
from harness.errors import HarnessError
from harness.metrics.metric import accuracy_metrics
from harness.scenario.verdict import VerdictRules


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


def emulated(attn_type: str | None) -> bool:
    """Whether a backend is a numerics model (the registry says so); unknown names are not."""
    if not attn_type:
        return False
    from harness.attention.registry import BACKENDS

    try:
        return bool(BACKENDS.get(attn_type).emulated)
    except HarnessError:
        return False


def timing_note(r: RunSummary) -> str:
    """Why an arm's timings are no baseline (empty when they are one)."""
    bits = r.timing_notes(noise_floor=r.role == "noise_floor")
    # run.json says it; older records ask the registry (which imports torch: about 0.6 GB)
    if r.emulated if r.emulated is not None else emulated(r.attn_type):
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
            seeds=sorted({r.seed for r in arm_runs if r.seed is not None}),
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
        same = len({r.output_sha256 for r in group}) == 1
        what = (
            "byte-identical in every repeat"
            if same
            else "differs between repeats (run-to-run nondeterminism)"
        )
        notes.append(f"{where}: {len(group)} runs, output.mp4 {what}")
    return notes
