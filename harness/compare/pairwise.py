"""Run B against run A (the reference): speed, accuracy (cached by both outputs' sha256), statistics, bitwise
checks, attention calls, latent PSNR; a run not ``ok`` or without output is reported as such, never raised."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from pydantic import Field

from harness.collect.models import (
    AUDIO_CONVENTION,
    STATS_CONVENTION,
    VIDEO_CONVENTION,
    AudioPairMetrics,
    VideoPairMetrics,
)
from harness.compare.cache import (
    latents_cached,
    measure_options,
    measure_pair_cached,
    run_stats,
    use_lossless,
)
from harness.compare.hashes import HASHES_JSON, PROCESS_HASHES, FileHashes
from harness.compare.latents import LATENT_CONVENTION, LatentPoint
from harness.compare.significance import SpeedTest, mean_sd_text, one_run_each
from harness.compare.summary import RunSummary, summarize_run
from harness.errors import HarnessError
from harness.pixel_formats import CONVENTION as RGB_CONVENTION
from harness.records import Record, steady_steps
from harness.safe_write import check_campaign_path, resolve_under
from harness.store import CAMPAIGN_JSON, RunDir, pair_metrics_stem, utcnow, write_record

COMPARE_SCHEMA = "harness.compare/1"
TIMING_CONVENTION = (
    "s/step=mean of DiT steps 2..N (step 1 alone when N=1), a step's seconds = max over ranks; "
    "speed-up=A time / B time with A the reference (above 1 = B faster); runs are the samples (never the "
    "steps of one run): faster/slower only when the speed-up's interval over runs clears the minimum effect "
    "and the Holm-adjusted test rejects equal times; `harness compare` of one run a side gives the speed-up "
    "and each run's step spread, no speed word"
)
CONVENTIONS = {
    "rgb": RGB_CONVENTION,
    "video": VIDEO_CONVENTION,
    "audio": AUDIO_CONVENTION,
    "stats": STATS_CONVENTION,
    "timing": TIMING_CONVENTION,
    "latent": LATENT_CONVENTION,
}


class SpeedComparison(Record):
    s_per_step_speedup: float | None = None  # A / B (above 1: B faster)
    total_speedup: float | None = None  # A / B
    step_speedups: list[float | None] = Field(default_factory=list)  # steps 1..3, A / B
    s_per_step_ratio: float | None = None  # B / A: what a gate's max_step_ratio bounds
    total_ratio: float | None = None  # B / A: a gate's max_total_ratio
    step_spread: list[str] = Field(default_factory=list)  # A's and B's steps 2..N: mean ± sd (n)
    s_per_step_test: SpeedTest | None = None  # one run a side: the speed-up, never a speed word
    total_test: SpeedTest | None = None
    s_per_step_line: str | None = None  # pyperf-style one-liners
    total_line: str | None = None


class Bitwise(Record):
    files: bool | None = None  # output.mp4 byte for byte
    video: bool | None = None  # every decoded frame
    audio: bool | None = None  # every decoded sample

    @property
    def identical(self) -> bool | None:
        """The one rule for "output bitwise the reference's": the files byte for byte, or every decoded frame
        and, where there is audio, every sample; False: a compared part differs; None: nothing compared."""
        if self.files or (self.video is True and self.audio is not False):
            return True
        if self.video is False or self.audio is False:
            return False
        return None


class Comparison(Record):
    schema_version: str = Field(COMPARE_SCHEMA, alias="schema")
    created_at: str = Field(default_factory=utcnow)
    kind: str = "candidate"  # identical-arm | noise_floor | candidate
    a: RunSummary
    b: RunSummary
    speed: SpeedComparison = Field(default_factory=SpeedComparison)
    video: VideoPairMetrics | None = None
    audio: AudioPairMetrics | None = None
    bitwise: Bitwise = Field(default_factory=Bitwise)
    latents: list[LatentPoint] = Field(default_factory=list)
    metrics_json: str | None = None
    frames_csv: str | None = None
    metrics_cached: bool = False
    metrics_seconds: float | None = None
    metrics_device: str | None = None
    options: dict[str, bool] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)  # why something is missing
    # Bad input (corrupt, truncated or mismatched outputs): the caller exits non-zero on these.
    errors: list[str] = Field(default_factory=list)
    conventions: dict[str, str] = Field(default_factory=lambda: dict(CONVENTIONS))

    @property
    def measured(self) -> bool:
        return self.video is not None


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a is not None and b is not None and a > 0 else None


def _not_measurable(s: RunSummary, side: str) -> str | None:
    if not s.ok:
        why = f": {s.reason}" if s.reason else ""
        return f"run {side} ({s.key}) did not finish ok (status {s.status}{why})"
    if s.output is None:
        return f"run {side} ({s.key}) has no output.mp4"
    return None


def _kind(a: RunSummary, b: RunSummary) -> str:
    if b.role == "noise_floor" or (
        b.attn_type == a.attn_type and b.kv_reversed and not a.kv_reversed and b.arm != a.arm
    ):
        return "noise_floor"
    if a.arm == b.arm and a.attn_type == b.attn_type and a.kv_reversed == b.kv_reversed:
        return "identical-arm"
    return "candidate"


def _steps_text(r: RunSummary) -> str:
    xs = steady_steps(r.step_seconds)  # DiT steps 2..N: step 1 carries warm-up
    if not xs:
        return "n/a"
    sd = statistics.stdev(xs) if len(xs) > 1 else None
    return mean_sd_text(statistics.fmean(xs), sd, len(xs)).replace("(n=", "(steps, n=")


def _speed(a: RunSummary, b: RunSummary) -> SpeedComparison:
    """One run a side: speed-ups and each run's step spread; the steps of one process are not
    independent samples, so no speed word (a campaign's repeats give one)."""
    sp = SpeedComparison(
        s_per_step_speedup=_ratio(b.s_per_step, a.s_per_step),
        total_speedup=_ratio(b.pipeline_total_s, a.pipeline_total_s),
        step_speedups=[_ratio(b.step(i), a.step(i)) for i in (1, 2, 3)],
        s_per_step_ratio=_ratio(a.s_per_step, b.s_per_step),
        total_ratio=_ratio(a.pipeline_total_s, b.pipeline_total_s),
    )
    if a.step_seconds and b.step_seconds:
        sp.step_spread = [_steps_text(a), _steps_text(b)]
        sp.s_per_step_test = one_run_each(a.s_per_step, b.s_per_step, what="DiT s/step")
        sp.s_per_step_line = (
            f"{sp.s_per_step_test.line} [steps 2..N: {sp.step_spread[0]} -> {sp.step_spread[1]}]"
        )
    if a.pipeline_total_s is not None and b.pipeline_total_s is not None:
        sp.total_test = one_run_each(a.pipeline_total_s, b.pipeline_total_s, what="pipeline total")
        sp.total_line = sp.total_test.line
    return sp


def _audio_notes(au: AudioPairMetrics) -> list[str]:
    """What was done to the tracks before measuring them, and what is reported, not removed."""
    lag = au.residual_lag_samples
    ms = 1000 * lag / au.sample_rate if lag else 0.0
    corr = (
        ""
        if au.residual_corr is None
        else f", correlation {au.residual_corr:.4f} there against {au.aligned_corr:.4f}"
    )
    notes = {
        f"audio: {au.samples_dropped} samples per channel dropped from the longer track": au.samples_dropped,
        f"audio: the containers' timestamps place B {au.lag_samples:+d} samples against A (metrics taken at that "
        "alignment)": au.lag_samples,
        f"audio: residual lag {lag:+d} samples ({ms:+.1f} ms, {'B late' if lag > 0 else 'B early'}) after the "
        f"containers' alignment{corr}: reported, not removed": lag,
        f"audio resampled: {au.resample_note or 'on request'}": au.resampled,
    }
    return [text for text, shown in notes.items() if shown]


def compare_summaries(
    a: RunSummary,
    b: RunSummary,
    *,
    metrics_dir: Path | None = None,
    truncate: bool = False,
    resample_audio: bool = False,
    hashes: FileHashes | None = None,
) -> Comparison:
    """Compare two summarised runs; ``hashes``: the latent files' memo (default: the process's)."""
    cmp = Comparison(
        kind=_kind(a, b),
        a=a.model_copy(),
        b=b.model_copy(),
        speed=_speed(a, b),
        options=measure_options(truncate, resample_audio, use_lossless(a, b)),
    )
    if a.output_sha256 and b.output_sha256:
        cmp.bitwise.files = a.output_sha256 == b.output_sha256
    blockers = [m for m in (_not_measurable(a, "A"), _not_measurable(b, "B")) if m]
    measured = None
    if not blockers:
        t0 = time.perf_counter()
        try:
            measured = measure_pair_cached(
                a, b, metrics_dir, truncate=truncate, resample_audio=resample_audio
            )
        except HarnessError as err:  # not comparable (frame count, resolution, audio track...)
            blockers.append(f"not comparable: {err}")
            cmp.errors.append(str(err))
    if measured is None:
        cmp.notes.extend(f"no accuracy metrics: {m}" for m in blockers)
        for side in (cmp.a, cmp.b):
            if side.ok and side.output is not None and side.stats is None:
                try:
                    side.stats = run_stats(side, metrics_dir)
                except HarnessError as err:
                    cmp.notes.append(f"no statistics for {side.key}: {err}")
                    if str(err) not in cmp.errors:
                        cmp.errors.append(str(err))
    else:
        result, cached, json_path, csv_path = measured
        cmp.metrics_seconds = result.seconds if cached else time.perf_counter() - t0
        cmp.metrics_cached = cached
        cmp.metrics_device = result.device
        cmp.video, cmp.audio = result.video, result.audio
        cmp.a.stats, cmp.b.stats = result.stats_a, result.stats_b
        cmp.bitwise.video = result.video.frames_bitwise_equal
        cmp.bitwise.audio = None if result.audio is None else result.audio.bitwise_equal
        cmp.metrics_json = str(json_path) if json_path else None
        cmp.frames_csv = str(csv_path) if csv_path else None
        if result.video.pixel_formats:
            cmp.notes.append(result.video.pixel_formats)
        v, au = result.video, result.audio
        cmp.notes += ["no audio metrics (a run has no audio track)"] if au is None else []
        if v.truncated_to is not None:
            cmp.notes.append(
                f"videos truncated to {v.truncated_to} frames (A has {v.frames_a}, B has {v.frames_b})"
            )
        cmp.notes += _audio_notes(au) if au is not None else []
    cmp.latents, latent_notes = latents_cached(a, b, metrics_dir, hashes or PROCESS_HASHES)
    cmp.notes.extend(latent_notes)
    return cmp


def compare_runs(
    run_a: RunDir,
    run_b: RunDir,
    *,
    metrics_dir: Path | None = None,
    truncate: bool = False,
    resample_audio: bool = False,
) -> Comparison:
    """B against A, cached in ``metrics_dir`` (default: the metrics/ folder of the campaign of both runs, else
    none) and written there as <a>__vs__<b>.compare.json."""
    camp = run_a.path.resolve().parent.parent
    if metrics_dir is None and camp == run_b.path.resolve().parent.parent and (camp / CAMPAIGN_JSON).exists():
        metrics_dir = camp / "metrics"  # both runs of one campaign: its metrics/ folder
    if metrics_dir is not None:  # a metrics/ linked out of its campaign: refused before anything is written
        check_campaign_path(Path(metrics_dir) / HASHES_JSON)
    hashes = FileHashes(Path(metrics_dir) / HASHES_JSON) if metrics_dir is not None else PROCESS_HASHES
    a, b = summarize_run(run_a, hashes=hashes), summarize_run(run_b, hashes=hashes)
    cmp = compare_summaries(
        a, b, metrics_dir=metrics_dir, truncate=truncate, resample_audio=resample_audio, hashes=hashes
    )
    if metrics_dir is not None:
        write_comparison(cmp, Path(metrics_dir))
        hashes.save()
    return cmp


def write_comparison(cmp: Comparison, metrics_dir: Path) -> Path | None:
    """metrics/<a>__vs__<b>.compare.json; None when the folder cannot be written (read-only)."""
    stem = pair_metrics_stem(cmp.a.key, cmp.b.key)
    path = resolve_under(metrics_dir, f"{stem}.compare.json", f"comparison {cmp.a.key!r} vs {cmp.b.key!r}")
    try:
        write_record(path, cmp)
    except OSError:
        return None
    return path
