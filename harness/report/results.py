"""Everything a campaign report shows, computed once and written as results.json.

Every run is compared with the reference arm of the same seed; with several seeds the
comparisons are also aggregated per arm (mean, min, max, std over seeds) and the noise floor
becomes a band. Failed and skipped runs stay in the results with their reason and log tail.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from pydantic import Field

from harness.compare.cache import run_stats
from harness.compare.latents import LatentPoint
from harness.compare.metrics import ACCURACY_METRICS
from harness.compare.pairwise import CONVENTIONS, Comparison, compare_summaries, write_comparison
from harness.compare.summary import RunSummary, stat_fields, summarize_run
from harness.compare.verdict import (
    DEFAULT_STATS_REL_TOL,
    Verdict,
    attention_verdict,
    judge,
    stats_tolerance_rule,
)
from harness.errors import HarnessError
from harness.records import Record
from harness.store import CampaignDir, CampaignRecord, utcnow

RESULTS_SCHEMA = "harness.report/1"
Progress = Callable[[str], None]


class Spread(Record):
    n: int
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    std: float | None = None  # sample std over seeds; None below two finite values
    values: list[float] = Field(default_factory=list)


def spread(values: list[float | None]) -> Spread:
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return Spread(n=0)
    finite = [v for v in vals if math.isfinite(v)]
    s = Spread(n=len(vals), values=vals, min=min(vals), max=max(vals))
    s.mean = (
        statistics.fmean(vals) if len(finite) == len(vals) else (math.inf if max(vals) == math.inf else None)
    )
    s.std = statistics.stdev(vals) if len(finite) == len(vals) and len(vals) > 1 else None
    return s


class ArmAggregate(Record):
    arm: str
    role: str
    attn_type: str | None = None
    kv_reversed: bool = False
    keys: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    runs_ok: int = 0
    metrics: dict[str, Spread] = Field(default_factory=dict)


class LatentSeries(Record):
    key: str
    arm: str
    seed: int | None = None
    role: str
    points: list[LatentPoint] = Field(default_factory=list)


class ReportResults(Record):
    schema_version: str = Field(RESULTS_SCHEMA, alias="schema")
    generated_at: str = Field(default_factory=utcnow)
    campaign_id: str
    campaign_path: str
    scenario_name: str
    scenario_file: str | None = None
    scenario_sha256: str | None = None
    profile: str | None = None
    runner: str
    executor: str = "local"
    kind: str = "e2e"
    harness_version: str | None = None
    created_at: str | None = None
    scenario: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    env_summary: list[tuple[str, str]] = Field(default_factory=list)
    conventions: dict[str, str] = Field(default_factory=dict)
    reference_arm: str | None = None
    noise_floor_arms: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    multi_seed: bool = False
    runs: list[RunSummary] = Field(default_factory=list)
    comparisons: list[Comparison] = Field(default_factory=list)
    arms: list[ArmAggregate] = Field(default_factory=list)
    latents: list[LatentSeries] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    exact_attention: str = ""
    stats_rel_tol: float = DEFAULT_STATS_REL_TOL
    frame_indices: list[int] = Field(default_factory=list)
    assets: dict[str, str] = Field(default_factory=dict)  # name -> path relative to the campaign
    notes: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # bad input met on the way (one line each)

    def run(self, key: str) -> RunSummary | None:
        return next((r for r in self.runs if r.key == key), None)

    def comparison_for(self, key: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.b.key == key), None)

    @property
    def primary_seed(self) -> int | None:
        return self.seeds[0] if self.seeds else None


def env_summary(env: dict[str, Any]) -> list[tuple[str, str]]:
    """The environment as (label, value) rows: the fingerprint's own summary, else flattened."""
    if not env:
        return []
    try:
        from harness.envinfo import summary_lines

        return [(str(k), str(v)) for k, v in summary_lines(env)]
    except Exception:  # an older or partial fingerprint: print what is there
        return flatten(env)


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            rows.extend(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, list) and any(isinstance(x, dict | list) for x in obj):
        for i, v in enumerate(obj):
            rows.extend(flatten(v, f"{prefix}[{i}]"))
    else:
        text = ", ".join(map(str, obj)) if isinstance(obj, list) else str(obj)
        rows.append((prefix, text if len(text) <= 300 else text[:297] + "..."))
    return rows


def _campaign_runs(campaign: CampaignDir, rec: CampaignRecord) -> tuple[list[RunSummary], list[str]]:
    """Every arm the campaign planned (in scenario order), then any other run folder found;
    and one line per run whose run.json cannot be read."""
    runs: list[RunSummary] = []
    damaged: list[str] = []
    seen: set[str] = set()
    for st in rec.arms:
        run = campaign.run(st.key)
        runs.append(summarize_run(run, st))
        if runs[-1].status == "damaged":
            damaged.append(f"{st.key}: {runs[-1].reason}")
        seen.add(st.key)
    for run in campaign.runs():
        if run.key not in seen:
            try:
                runs.append(summarize_run(run))
            except HarnessError as err:
                damaged.append(f"{run.key}: run.json unreadable: {err}")
    return runs, damaged


def _aggregate(arm_runs: list[RunSummary], cmps: list[Comparison]) -> dict[str, Spread]:
    m: dict[str, Spread] = {
        "s_per_step": spread([r.s_per_step for r in arm_runs]),
        "step_1": spread([r.step(1) for r in arm_runs]),
        "step_2": spread([r.step(2) for r in arm_runs]),
        "step_3": spread([r.step(3) for r in arm_runs]),
        "pipeline_total_s": spread([r.pipeline_total_s for r in arm_runs]),
        "dit_steps": spread([r.dit_steps for r in arm_runs]),
    }
    if cmps:
        m["s_per_step_ratio"] = spread([c.speed.s_per_step_ratio for c in cmps])
        m["total_ratio"] = spread([c.speed.total_ratio for c in cmps])
        for metric in ACCURACY_METRICS:
            m[metric.key] = spread([metric.get(c) for c in cmps])
    for name in stat_fields(None):
        m[name] = spread([stat_fields(r.stats)[name] for r in arm_runs])
    return m


def collect_results(
    campaign: CampaignDir,
    *,
    progress: Progress | None = None,
    stats_rel_tol: float = DEFAULT_STATS_REL_TOL,
) -> ReportResults:
    say = progress or (lambda _msg: None)
    if not campaign.exists():
        raise HarnessError(f"{campaign.path}: not a campaign directory (no campaign.json)")
    rec, damaged_campaign = campaign.record_or_rebuilt()
    runs, damaged_runs = _campaign_runs(campaign, rec)
    res = ReportResults(
        campaign_id=rec.campaign_id,
        campaign_path=str(campaign.path),
        scenario_name=rec.scenario_name,
        scenario_file=rec.scenario_file,
        scenario_sha256=rec.scenario_sha256,
        profile=rec.profile,
        runner=rec.runner,
        executor=rec.executor,
        kind=rec.kind,
        harness_version=rec.harness_version,
        created_at=rec.created_at,
        scenario=rec.scenario,
        env=rec.env,
        env_summary=env_summary(rec.env),
        conventions=dict(CONVENTIONS),
        stats_rel_tol=stats_rel_tol,
        runs=runs,
    )
    res.conventions["stats_tolerance"] = stats_tolerance_rule(stats_rel_tol)
    for problem in [damaged_campaign, *damaged_runs]:  # listed, never blocking the other arms
        if problem:
            res.errors.append(problem)
            res.notes.append(problem)
    res.seeds = sorted({r.seed for r in runs if r.seed is not None})
    res.multi_seed = len(res.seeds) > 1
    arms_in_order = list(dict.fromkeys(r.arm for r in runs))
    role_of = {r.arm: r.role for r in runs}
    refs = [a for a in arms_in_order if role_of[a] == "reference"]
    res.noise_floor_arms = [a for a in arms_in_order if role_of[a] == "noise_floor"]
    if not refs:
        res.notes.append("no arm has role reference: nothing is compared; speed and statistics only")
    else:
        res.reference_arm = refs[0]
        if len(refs) > 1:
            res.notes.append(f"several reference arms ({', '.join(refs)}); {refs[0]} is used")

    # Each run against the reference of its seed.
    ref_by_seed = {r.seed: r for r in runs if r.arm == res.reference_arm}
    todo = [r for r in runs if res.reference_arm and r.arm != res.reference_arm]
    for i, run in enumerate(todo, 1):
        ref = ref_by_seed.get(run.seed)
        if ref is None:
            res.notes.append(f"{run.key}: no reference run for seed {run.seed}")
            continue
        say(f"compare {run.key} against {ref.key} ({i}/{len(todo)})")
        cmp = compare_summaries(ref, run, metrics_dir=campaign.metrics_dir)
        write_comparison(cmp, campaign.metrics_dir)
        res.comparisons.append(cmp)
        res.errors.extend(e for e in cmp.errors if e not in res.errors)

    # Fill each run's statistics (from its comparisons, else measured alone).
    stats_of = {}
    for c in res.comparisons:
        for side in (c.a, c.b):
            if side.stats is not None:
                stats_of[side.key] = side.stats
    for r in runs:
        r.stats = stats_of.get(r.key)
        if r.stats is None and r.ok and r.output is not None:
            say(f"statistics of {r.key}")
            try:
                r.stats = run_stats(r, campaign.metrics_dir)
            except HarnessError as err:
                r.notes.append(f"no statistics: {err}")
                res.notes.append(f"{r.key}: no statistics: {err}")
                if str(err) not in res.errors:
                    res.errors.append(str(err))

    for arm in arms_in_order:
        arm_runs = [r for r in runs if r.arm == arm]
        first = arm_runs[0]
        cmps = [c for c in res.comparisons if c.b.arm == arm]
        res.arms.append(
            ArmAggregate(
                arm=arm,
                role=first.role,
                attn_type=first.attn_type,
                kv_reversed=first.kv_reversed,
                keys=[r.key for r in arm_runs],
                seeds=sorted({r.seed for r in arm_runs if r.seed is not None}),
                runs_ok=sum(r.ok for r in arm_runs),
                metrics=_aggregate(arm_runs, cmps),
            )
        )

    for c in res.comparisons:
        if c.latents:
            res.latents.append(
                LatentSeries(key=c.b.key, arm=c.b.arm, seed=c.b.seed, role=c.b.role, points=c.latents)
            )

    floor_arm = res.noise_floor_arms[0] if res.noise_floor_arms else None
    floors = {c.b.seed: c for c in res.comparisons if c.b.arm == floor_arm and c.measured}
    for arm in arms_in_order:
        if role_of[arm] != "candidate":
            continue
        cmps = [c for c in res.comparisons if c.b.arm == arm]
        arm_runs = [r for r in runs if r.arm == arm]
        res.verdicts.append(judge(arm, cmps, floors, runs=arm_runs, rel_tol=stats_rel_tol))
    exact = [r for r in runs if r.role in ("reference", "noise_floor")]
    ok, text = attention_verdict(exact)
    res.exact_attention = f"exact runs ({', '.join(r.key for r in exact) or 'none'}): {text}"
    if floor_arm is None and res.reference_arm:
        res.notes.append("no noise_floor arm: candidates cannot be judged against a noise floor")
    return res
