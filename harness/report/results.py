"""Everything a campaign report shows, computed once and written as results.json.

Every run (the first repeat of each arm and seed) is compared with the reference arm of the
same seed; the comparisons are aggregated per arm (mean, min, max, std over seeds), the noise
floor becomes a band over perturbations x seeds, and each candidate gets a verdict. Speed is
aggregated over every run of an arm (repeats x seeds) and tested against the reference with
``compare.significance``. The codec floor of the reference is measured once. Failed and
skipped runs stay in the results with their reason and log tail.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from pydantic import Field

from harness.collect.audio_align import CONVENTION as AUDIO_LAG_CONVENTION
from harness.collect.codec_floor import CodecSettings, encoder_settings
from harness.compare.cache import CodecFloor, codec_floor_cached, run_stats
from harness.compare.latents import LatentPoint
from harness.compare.metrics import ACCURACY_METRICS
from harness.compare.pairwise import CONVENTIONS, Comparison, compare_summaries, write_comparison
from harness.compare.significance import TEST_NAME, SpeedTest, compare_samples
from harness.compare.summary import RunSummary, stat_fields, summarize_run
from harness.compare.verdict import (
    PairErrors,
    Verdict,
    attention_verdict,
    judge,
    pooled,
    psnr_from_mse,
    ratio_text,
    stats_rule_text,
)
from harness.errors import HarnessError
from harness.media import LOSSLESS_CONVENTION
from harness.number_format import fmt_db
from harness.records import Record
from harness.scenario.verdict import VerdictRules
from harness.store import CampaignDir, CampaignRecord, utcnow

RESULTS_SCHEMA = "harness.report/2"  # 2: error-energy verdicts, floor band, speed tests, repeats
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
    perturbation: str = ""  # how a noise-floor arm perturbs exact attention
    keys: list[str] = Field(default_factory=list)  # every run: seeds x repeats
    seeds: list[int] = Field(default_factory=list)
    repeats: int = 1  # most runs of one seed
    runs_ok: int = 0
    metrics: dict[str, Spread] = Field(default_factory=dict)  # speed over runs, accuracy over seeds
    speed: dict[str, SpeedTest] = Field(default_factory=dict)  # s_per_step, pipeline_total_s vs the reference
    timing_baseline: bool = True
    timing_label: str = ""  # "not a timing baseline" (a noise floor), "an emulator's timing"
    timing_note: str = ""  # why its timings are no baseline


class FloorSummary(Record):
    """The noise floor as a distribution: every noise-floor run against the reference."""

    arms: list[str] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)
    perturbations: dict[str, str] = Field(default_factory=dict)  # arm -> what it perturbs
    psnr_pooled: float | None = None  # from the mean MSE over all floor runs
    band: dict[str, list[float]] = Field(default_factory=dict)  # metric key -> min, median, max
    chaotic: bool = False
    text: str = ""


class CodecFloorRow(Record):
    """The codec's own error on the reference, with its share of the floor's error energy."""

    key: str
    method: str
    settings: CodecSettings
    decode: str = ""
    psnr_pooled: float | None = None
    psnr_min: float | None = None
    psnr_min_frame: int | None = None
    ssim_mean: float | None = None
    ssim_min: float | None = None
    ssim_min_frame: int | None = None
    audio_snr: float | None = None
    audio_logmel_cosine: float | None = None
    mse: float | None = None
    share_of_floor: float | None = None  # codec MSE / floor pooled MSE
    text: str = ""


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
    rules: VerdictRules = Field(default_factory=VerdictRules)
    repeats: int = 1  # most runs of one arm and seed
    floor: FloorSummary | None = None
    codec_floor: CodecFloorRow | None = None
    pixel_source: str = ""  # what the pixel metrics were taken on (lossless copies or decoded mp4)
    repeat_notes: list[str] = Field(default_factory=list)  # are repeats' outputs byte-identical
    frame_indices: list[int] = Field(default_factory=list)
    assets: dict[str, str] = Field(default_factory=dict)  # name -> path relative to the campaign
    notes: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # bad input met on the way (one line each)

    def run(self, key: str) -> RunSummary | None:
        return next((r for r in self.runs if r.key == key), None)

    @property
    def primary_runs(self) -> list[RunSummary]:
        """The first repeat of every arm and seed: the runs compared for accuracy."""
        return [r for r in self.runs if r.repeat == 1]

    def arm(self, name: str) -> ArmAggregate | None:
        return next((a for a in self.arms if a.arm == name), None)

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
    """Speed over every run of the arm (repeats x seeds); accuracy and statistics over seeds."""
    m: dict[str, Spread] = {
        "s_per_step": spread([r.s_per_step for r in arm_runs]),
        "step_1": spread([r.step(1) for r in arm_runs]),
        "step_2": spread([r.step(2) for r in arm_runs]),
        "step_3": spread([r.step(3) for r in arm_runs]),
        "pipeline_total_s": spread([r.pipeline_total_s for r in arm_runs]),
        "dit_steps": spread([r.dit_steps for r in arm_runs]),
    }
    if cmps:
        for metric in ACCURACY_METRICS:
            m[metric.key] = spread([metric.get(c) for c in cmps])
        m["identical_frames"] = spread([c.video.identical_frames if c.video else None for c in cmps])
    for name in stat_fields(None):
        m[name] = spread([stat_fields(r.stats)[name] for r in arm_runs if r.repeat == 1])
    return m


TIMING_NOTES = {
    "kv_reversed": "the K/V-reversed wrapper copies K and V (flip) before every call",
    "kv_chunks": "the chunked wrapper attends to each K/V chunk and adds an fp32 log-sum-exp pass",
}


def _timing_note(r: RunSummary) -> str:
    """Why an arm's timings are no baseline (empty when they are one)."""
    bits = []
    if r.kv_reversed:
        bits.append(TIMING_NOTES["kv_reversed"])
    if r.kv_chunks > 1:
        bits.append(TIMING_NOTES["kv_chunks"])
    if r.role == "noise_floor" and r.attn_options and not bits:
        bits.append("another exact kernel, run as a noise floor")
    if _emulated(r.attn_type):
        bits.append("a numerics model in PyTorch, not a kernel")
    return "; ".join(bits)


def _emulated(attn_type: str | None) -> bool:
    """Whether a backend is a numerics model (the registry says so); unknown names are not."""
    if not attn_type:
        return False
    from harness.attention.registry import backend_class

    try:
        return bool(backend_class(attn_type).emulated)
    except HarnessError:
        return False


def _speed_tests(
    arm_runs: list[RunSummary], ref_runs: list[RunSummary], alpha: float
) -> dict[str, SpeedTest]:
    ok, ref = [r for r in arm_runs if r.ok], [r for r in ref_runs if r.ok]
    return {
        "s_per_step": compare_samples(
            [r.s_per_step for r in ref], [r.s_per_step for r in ok], what="DiT s/step", alpha=alpha
        ),
        "pipeline_total_s": compare_samples(
            [r.pipeline_total_s for r in ref],
            [r.pipeline_total_s for r in ok],
            what="pipeline total",
            alpha=alpha,
        ),
    }


def scenario_rules(scenario: dict[str, Any], notes: list[str]) -> VerdictRules:
    """The campaign's verdict rules (its resolved scenario's ``verdict`` block), else the defaults."""
    try:
        return VerdictRules.model_validate(scenario.get("verdict") or {})
    except Exception as err:  # an older or hand-edited campaign.json: say so, judge with the defaults
        notes.append(
            f"verdict rules in campaign.json unreadable ({' '.join(str(err).split())[:200]}); defaults used"
        )
        return VerdictRules()


def _floor_kind(c: Comparison) -> str:
    """What a floor run changes: its perturbation, or the exact kernel it runs instead."""
    if c.b.perturbation:
        return c.b.perturbation
    if c.b.attn_type != c.a.attn_type:
        return f"another exact kernel: {c.b.attn_type}"
    return "the reference's backend again (no perturbation)"


def _floor_summary(floors: list[Comparison], rules: VerdictRules) -> FloorSummary | None:
    measured = [c for c in floors if c.measured]
    if not measured:
        return None
    f = FloorSummary(
        arms=list(dict.fromkeys(c.b.arm for c in measured)),
        keys=[c.b.key for c in measured],
        perturbations={c.b.arm: _floor_kind(c) for c in measured},
    )
    mse, _ = pooled([PairErrors.from_comparison(c) for c in measured], "video_mse")
    f.psnr_pooled = None if mse is None else psnr_from_mse(mse)
    for metric in ACCURACY_METRICS:
        vals = sorted(x for x in (metric.get(c) for c in measured) if x is not None and not math.isnan(x))
        if vals:
            f.band[metric.key] = [vals[0], statistics.median(vals), vals[-1]]
    f.chaotic = f.psnr_pooled is not None and f.psnr_pooled < rules.chaotic_below_db
    n_arms, n_seeds = len(f.arms), len({c.b.seed for c in measured})
    f.text = (
        f"{len(measured)} floor run(s) ({n_arms} perturbation(s) x {n_seeds} seed(s)): pooled video PSNR "
        f"{fmt_db(f.psnr_pooled)}"
    )
    if f.chaotic:
        f.text += (
            f", below {rules.chaotic_below_db:g} dB: exact attention alone gives a different video, so pixel "
            "metrics against one reference do not measure attention accuracy here"
        )
    return f


def _codec_settings(campaign: CampaignDir, ref: RunSummary) -> CodecSettings:
    crf = preset = None
    try:
        pipeline = campaign.run(ref.key).record().spec.params.get("pipeline") or {}
        crf, preset = pipeline.get("crf"), pipeline.get("x264_preset")
    except HarnessError:
        pass
    assert ref.output is not None
    return encoder_settings(ref.output, crf=crf, preset=preset)


def _codec_floor(res: ReportResults, campaign: CampaignDir, say: Progress) -> None:
    ref = next(
        (
            r
            for r in res.primary_runs
            if r.arm == res.reference_arm and r.seed == res.primary_seed and r.output
        ),
        None,
    )
    if ref is None or not ref.ok:
        return
    say(f"codec floor of {ref.key}")
    try:
        entry: CodecFloor | None = codec_floor_cached(
            ref, campaign.metrics_dir, _codec_settings(campaign, ref)
        )
    except HarnessError as err:
        res.notes.append(f"codec floor of {ref.key} not measured: {err}")
        return
    if entry is None:
        return
    v, a = entry.result.video, entry.result.audio
    row = CodecFloorRow(
        key=ref.key,
        method=entry.method,
        settings=entry.settings,
        decode=entry.decode,
        psnr_pooled=v.psnr_pooled,
        psnr_min=v.psnr_min,
        psnr_min_frame=v.psnr_min_frame,
        ssim_mean=v.ssim_mean,
        ssim_min=v.ssim_min,
        ssim_min_frame=v.ssim_min_frame,
        audio_snr=a.snr_db if a else None,
        audio_logmel_cosine=a.logmel_cosine if a else None,
        mse=v.mse_mean,
    )
    how = (
        "the decoded output.mp4 against the run's lossless copy: the error of the encode the run made"
        if entry.method == "lossless"
        else "the reference's decoded frames and audio encoded again with the run's codec settings, against "
        "the decoded reference: a second-generation estimate, usually smaller than the first encode's error"
    )
    row.text = f"codec floor ({entry.settings.text()}): {how}; {fmt_db(v.psnr_pooled)} pooled"
    floor_mse = None
    if res.floor is not None and res.floor.psnr_pooled is not None and not math.isinf(res.floor.psnr_pooled):
        floor_mse = 255.0**2 / 10 ** (res.floor.psnr_pooled / 10)
    if floor_mse and v.mse_mean is not None:
        row.share_of_floor = share = v.mse_mean / floor_mse
        if res.pixel_source.startswith("lossless"):
            limits = (
                "pixel metrics are taken on the lossless copies, before compression: the codec is not in them"
            )
        elif share >= 0.5:
            limits = (
                "the codec's error is of the floor's order or larger, so the pixel figures mix compression "
                "with attention (two encodes of nearly equal frames err alike: their difference is not codec "
                "error plus attention error); lossless copies (builtin: {lossless: true}) take them before "
                "compression"
            )
        elif share >= 0.1:
            limits = "the codec's error is a visible part of the pixel figures"
        else:
            limits = "the floor's pixel error is well above the codec's"
        row.text += f"; its error energy is {ratio_text(share)} the noise floor's: {limits}"
    res.codec_floor = row


def _repeat_notes(runs: list[RunSummary]) -> list[str]:
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
        notes.append(
            f"{where}: {len(group)} runs, output.mp4 "
            + (
                "byte-identical in every repeat"
                if same
                else "differs between repeats (run-to-run nondeterminism)"
            )
        )
    return notes


def collect_results(
    campaign: CampaignDir,
    *,
    progress: Progress | None = None,
    rules: VerdictRules | None = None,
) -> ReportResults:
    """``rules``: how verdicts and speed tests judge (default: the campaign's scenario, else the defaults)."""
    say = progress or (lambda _msg: None)
    if not campaign.exists():
        raise HarnessError(f"{campaign.path}: not a campaign directory (no campaign.json)")
    rec, damaged_campaign = campaign.record_or_rebuilt()
    runs, damaged_runs = _campaign_runs(campaign, rec)
    notes: list[str] = []
    rules = rules or scenario_rules(rec.scenario, notes)
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
        rules=rules,
        runs=runs,
        notes=notes,
    )
    res.conventions["audio_lag"] = AUDIO_LAG_CONVENTION
    res.conventions["stats_tolerance"] = stats_rule_text(rules.stats_rel_tol)
    res.conventions["verdict"] = (
        f"error energy = MSE, 1 - SSIM, audio error energy 10^(-SNR/10) (1 - log-mel cosine when the floor's SNR "
        f"< {rules.audio_snr_min_db:g} dB), earliest-step latent MSE; candidate vs reference pooled over frames "
        f"and seeds, divided by the same over every noise-floor run; within when <= {rules.tolerance:g}x; pixel "
        f"and audio pair metrics uninformative when the floor's pooled PSNR < {rules.chaotic_below_db:g} dB"
    )
    res.conventions["speed_significance"] = (
        f"{TEST_NAME} over runs (repeats x seeds), alpha {rules.alpha:g}; 2 runs a side at least"
    )
    for problem in [damaged_campaign, *damaged_runs]:  # listed, never blocking the other arms
        if problem:
            res.errors.append(problem)
            res.notes.append(problem)
    res.seeds = sorted({r.seed for r in runs if r.seed is not None})
    res.multi_seed = len(res.seeds) > 1
    res.repeats = max((r.repeat for r in runs), default=1)
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

    # Each run (first repeat) against the reference of its seed.
    primary = res.primary_runs
    ref_by_seed = {r.seed: r for r in primary if r.arm == res.reference_arm}
    todo = [r for r in primary if res.reference_arm and r.arm != res.reference_arm]
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
    for r in primary:
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

    ref_runs = [r for r in runs if r.arm == res.reference_arm]
    for arm in arms_in_order:
        arm_runs = [r for r in runs if r.arm == arm]
        first = arm_runs[0]
        cmps = [c for c in res.comparisons if c.b.arm == arm]
        agg = ArmAggregate(
            arm=arm,
            role=first.role,
            attn_type=first.attn_type,
            kv_reversed=first.kv_reversed,
            perturbation=first.perturbation,
            keys=[r.key for r in arm_runs],
            seeds=sorted({r.seed for r in arm_runs if r.seed is not None}),
            repeats=max(r.repeat for r in arm_runs),
            runs_ok=sum(r.ok for r in arm_runs),
            metrics=_aggregate(arm_runs, cmps),
            timing_note=_timing_note(first),
        )
        agg.timing_baseline = not agg.timing_note
        if agg.timing_note:
            agg.timing_label = (
                "not a timing baseline" if first.role == "noise_floor" else "an emulator's timing"
            )
        if res.reference_arm and arm != res.reference_arm:
            agg.speed = _speed_tests(arm_runs, ref_runs, rules.alpha)
        res.arms.append(agg)
    res.repeat_notes = _repeat_notes(runs)

    for c in res.comparisons:
        if c.latents:
            res.latents.append(
                LatentSeries(key=c.b.key, arm=c.b.arm, seed=c.b.seed, role=c.b.role, points=c.latents)
            )

    floors = [c for c in res.comparisons if c.b.role == "noise_floor" and c.measured]
    res.floor = _floor_summary(floors, rules)
    for arm in arms_in_order:
        if role_of[arm] != "candidate":
            continue
        cmps = [c for c in res.comparisons if c.b.arm == arm]
        arm_runs = [r for r in runs if r.arm == arm]
        res.verdicts.append(judge(arm, cmps, floors, runs=arm_runs, rules=rules))
    exact = [r for r in runs if r.role in ("reference", "noise_floor")]
    ok, text = attention_verdict(exact)
    res.exact_attention = f"exact runs ({', '.join(r.key for r in exact) or 'none'}): {text}"
    if not res.noise_floor_arms and res.reference_arm:
        res.notes.append("no noise_floor arm: candidates cannot be judged against a noise floor")
    measured = [c for c in res.comparisons if c.measured]
    if measured:
        lossless = all(c.options.get("lossless") for c in measured)
        first = next((r for r in primary if r.output), None)
        decode = ""
        if first is not None and not lossless:
            try:
                from harness.collect.codec_floor import decode_convention

                decode = decode_convention(first.output)
            except HarnessError:
                decode = "decode convention unreadable"
        res.pixel_source = (
            f"lossless copies (output_lossless.mkv: {LOSSLESS_CONVENTION}): before compression"
            if lossless
            else f"output.mp4 as decoded: {decode}"
        )
        res.conventions["pixel_source"] = res.pixel_source
    _codec_floor(res, campaign, say)
    return res
