"""Pairwise comparison of two runs, run A being the reference.

``compare_runs`` gathers what each run left (run.json, timing.json, attn_calls.json,
output.mp4), measures the pair through the collectors (cached in the metrics folder, keyed by
the sha256 of both output files) and returns a ``Comparison``: speed, accuracy, global
statistics, bitwise checks and attention calls. A run that did not end ``ok`` or has no
output is reported as such, never raised. Gates (``load_gate``/``check_gate``) live in
``harness.verdict`` and are re-exported here for the CLI.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from harness.collect.models import (
    AUDIO_CONVENTION,
    STATS_CONVENTION,
    VIDEO_CONVENTION,
    AudioPairMetrics,
    PairResult,
    RunStats,
    VideoPairMetrics,
)
from harness.errors import HarnessError
from harness.number_format import one_liner
from harness.records import RankCalls, Record, RunStatus
from harness.store import (
    CAMPAIGN_JSON,
    OUTPUT_MP4,
    STDERR_LOG,
    STDOUT_LOG,
    ArmStatus,
    RunDir,
    pair_metrics_stem,
    read_record,
    sha256_file,
    tail_text,
    utcnow,
    write_record,
)

COMPARE_SCHEMA = "harness.compare/1"
TIMING_CONVENTION = (
    "s/step=mean of DiT steps 2..N (step 1 alone when N=1), a step's seconds = max over ranks; "
    "ratio=B/A with A the reference (below 1 = B faster); speed-up=A/B"
)
LATENT_CONVENTION = (
    "latent psnr=10log10(R^2/mse) on float64, R=max(ref)-min(ref) of the reference step latent, "
    "mse over all elements; per named array of step_XXX.npz and over all of them concatenated; "
    "scalars (sigmas) ignored; +inf when equal"
)
CONVENTIONS = {
    "video": VIDEO_CONVENTION,
    "audio": AUDIO_CONVENTION,
    "stats": STATS_CONVENTION,
    "timing": TIMING_CONVENTION,
    "latent": LATENT_CONVENTION,
}
LOG_TAIL_LINES = 25

Progress = Callable[[str], None]


# ---------------------------------------------------------------------------- models


class AttnSummary(Record):
    requested: str
    kv_reversed: bool = False
    ranks: dict[str, RankCalls] = Field(default_factory=dict)
    calls_requested: int = 0  # calls served by the requested backend, all ranks
    calls_total: int = 0  # calls served by any backend, all ranks
    fallbacks: int = 0
    valid: bool = False
    reasons: list[str] = Field(default_factory=list)


class RunSummary(Record):
    """What one run says about itself (no decoding): status, timing, attention, output hash."""

    key: str
    path: str
    arm: str
    seed: int | None = None
    role: str = "candidate"
    attn_type: str | None = None
    kv_reversed: bool = False
    status: str = "pending"
    reason: str | None = None
    log_tail: str = ""
    valid: bool | None = None  # attention validity (run.json, else attn_calls.json)
    invalid_reasons: list[str] = Field(default_factory=list)
    output: str | None = None  # path of output.mp4 when present
    output_sha256: str | None = None
    dit_steps: int | None = None
    step_seconds: list[float] = Field(default_factory=list)
    s_per_step: float | None = None
    pipeline_total_s: float | None = None
    wall_total_s: float | None = None
    stages: dict[str, float] = Field(default_factory=dict)
    timing_source: str | None = None
    timing_missing: list[str] = Field(default_factory=list)
    attn: AttnSummary | None = None
    stats: RunStats | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.ok.value

    def step(self, index: int) -> float | None:
        """Seconds of DiT step ``index`` (1-based)."""
        return self.step_seconds[index - 1] if 0 < index <= len(self.step_seconds) else None

    @property
    def label(self) -> str:
        return self.key


class SpeedComparison(Record):
    s_per_step_ratio: float | None = None  # B / A
    total_ratio: float | None = None  # B / A
    step_ratios: list[float | None] = Field(default_factory=list)  # steps 1..3, B / A
    s_per_step_line: str | None = None  # pyperf-style one-liners
    total_line: str | None = None


class Bitwise(Record):
    files: bool | None = None  # output.mp4 byte for byte
    video: bool | None = None  # every decoded frame
    audio: bool | None = None  # every decoded sample


class LatentPoint(Record):
    step: int
    psnr: float  # over every latent of the step together
    max_abs_diff: float
    parts: dict[str, float] = Field(default_factory=dict)  # PSNR per named latent (npz: video, audio)


class Comparison(Record):
    """Run B against run A (the reference)."""

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


class PairCache(Record):
    """metrics/<a>__vs__<b>.json: a pair's metrics and the output hashes they were measured on."""

    schema_version: str = Field("harness.pair_cache/1", alias="schema")
    key_a: str
    key_b: str
    sha256_a: str
    sha256_b: str
    options: dict[str, bool] = Field(default_factory=dict)
    created_at: str = Field(default_factory=utcnow)
    result: PairResult


class StatsCache(Record):
    """metrics/<run>.stats.json: one run's global statistics and the output hash they describe."""

    schema_version: str = Field("harness.stats_cache/1", alias="schema")
    key: str
    sha256: str
    created_at: str = Field(default_factory=utcnow)
    stats: RunStats


def stat_fields(stats: RunStats | None) -> dict[str, float | None]:
    """The statistics shown and checked (numbers that describe content, not the container)."""
    names = (
        "luma_mean",
        "luma_std",
        "sharpness",
        "motion",
        "black_frames",
        "frozen_frames",
        "nan_like_frames",
        "audio_rms",
        "audio_peak",
    )
    if stats is None:
        return dict.fromkeys(names)
    return {n: (None if getattr(stats, n) is None else float(getattr(stats, n))) for n in names}


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a is not None and b is not None and a > 0 else None


# ---------------------------------------------------------------------------- runs

_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised on (path, mtime, size) for the life of the process."""
    st = os.stat(path)
    memo_key = (str(Path(path).resolve()), st.st_mtime_ns, st.st_size)
    if memo_key not in _SHA_MEMO:
        _SHA_MEMO[memo_key] = sha256_file(path)
    return _SHA_MEMO[memo_key]


def _log_tail(run: RunDir, recorded: str) -> str:
    if recorded.strip():
        return "\n".join(recorded.splitlines()[-LOG_TAIL_LINES:])
    parts = [tail_text(run.file(name), LOG_TAIL_LINES) for name in (STDERR_LOG, STDOUT_LOG)]
    return next((p for p in parts if p.strip()), "")


def summarize_run(run: RunDir, arm_status: ArmStatus | None = None) -> RunSummary:
    """A run's own account of itself. Unreadable side files become notes, not errors."""
    notes: list[str] = []
    rec = None
    if run.exists():
        rec = run.record()
    if rec is None and arm_status is None:
        raise HarnessError(f"{run.path}: not a run directory (no run.json inside)")
    if rec is not None:
        spec = rec.spec
        s = RunSummary(
            key=run.key,
            path=str(run.path),
            arm=spec.arm,
            seed=spec.seed,
            role=spec.role.value,
            attn_type=spec.attn_type,
            kv_reversed=spec.kv_reversed,
            status=rec.status.value,
            reason=rec.reason,
            valid=rec.valid,
            invalid_reasons=list(rec.invalid_reasons),
        )
        if not s.ok:
            s.log_tail = _log_tail(run, rec.log_tail)
    else:
        assert arm_status is not None
        s = RunSummary(
            key=arm_status.key,
            path=str(run.path),
            arm=arm_status.arm,
            seed=arm_status.seed,
            role=arm_status.role,
            attn_type=arm_status.attn_type,
            kv_reversed=arm_status.kv_reversed,
            status=arm_status.status.value,
            reason=arm_status.reason or "no run.json was written",
            valid=arm_status.valid,
        )
        s.log_tail = _log_tail(run, "")
        return s

    try:
        timing = run.timing()
    except HarnessError as err:
        timing = None
        notes.append(f"timing.json unreadable: {err}")
    if timing is not None:
        s.step_seconds = timing.step_seconds()
        s.dit_steps = timing.dit_steps
        s.s_per_step = timing.s_per_step
        s.pipeline_total_s = timing.pipeline_total_s
        s.wall_total_s = timing.wall_total_s
        s.stages = dict(timing.stages)
        s.timing_source = timing.source
        s.timing_missing = list(timing.missing)
    elif s.ok:
        notes.append("no timing.json")

    try:
        calls = run.attn_calls()
    except HarnessError as err:
        calls = None
        notes.append(f"attn_calls.json unreadable: {err}")
    if calls is not None:
        valid, reasons = calls.validity()
        s.attn = AttnSummary(
            requested=calls.requested,
            kv_reversed=calls.kv_reversed,
            ranks=dict(calls.ranks),
            calls_requested=calls.total(),
            calls_total=sum(sum(r.calls.values()) for r in calls.ranks.values()),
            fallbacks=calls.total_fallbacks(),
            valid=valid,
            reasons=reasons,
        )
        if s.valid is None:
            s.valid, s.invalid_reasons = valid, reasons
    elif s.ok:
        notes.append("no attn_calls.json: attention calls were not recorded")

    if run.output.is_file() and run.output.stat().st_size > 0:
        s.output = str(run.output)
        s.output_sha256 = file_sha256(run.output)
        recorded = rec.outputs.get(OUTPUT_MP4)
        if recorded and recorded != s.output_sha256:
            notes.append("output.mp4 changed since run.json recorded its sha256")
    elif s.ok:
        notes.append("no output.mp4")
    s.notes = notes
    return s


def _not_measurable(s: RunSummary, side: str) -> str | None:
    if not s.ok:
        why = f": {s.reason}" if s.reason else ""
        return f"run {side} ({s.key}) did not finish ok (status {s.status}{why})"
    if s.output is None:
        return f"run {side} ({s.key}) has no output.mp4"
    return None


# ---------------------------------------------------------------------------- caching


def _options(truncate: bool, resample_audio: bool) -> dict[str, bool]:
    return {"truncate": truncate, "resample_audio": resample_audio}


def _load_pair_cache(path: Path, sha_a: str, sha_b: str, options: dict[str, bool]) -> PairCache | None:
    if not path.exists():
        return None
    try:
        entry = read_record(path, PairCache)
    except HarnessError:
        return None  # an older or damaged entry is simply measured again
    if entry.sha256_a != sha_a or entry.sha256_b != sha_b or entry.options != options:
        return None
    return entry


def _write_stats_cache(metrics_dir: Path, key: str, sha: str, stats: RunStats) -> None:
    write_record(metrics_dir / f"{key}.stats.json", StatsCache(key=key, sha256=sha, stats=stats))


def run_stats(run: RunSummary, metrics_dir: Path | None) -> RunStats | None:
    """Global statistics of one run's output, from the cache when its hash still matches."""
    if run.output is None or run.output_sha256 is None:
        return None
    if metrics_dir is not None:
        path = Path(metrics_dir) / f"{run.key}.stats.json"
        if path.exists():
            try:
                entry = read_record(path, StatsCache)
                if entry.sha256 == run.output_sha256:
                    return entry.stats
            except HarnessError:
                pass
    from harness.collect.suite import measure_run

    stats = measure_run(Path(run.output))
    if metrics_dir is not None:
        _write_stats_cache(Path(metrics_dir), run.key, run.output_sha256, stats)
    return stats


def measure_pair_cached(
    a: RunSummary,
    b: RunSummary,
    metrics_dir: Path | None,
    *,
    truncate: bool = False,
    resample_audio: bool = False,
) -> tuple[PairResult, bool, Path | None, Path | None]:
    """(result, from_cache, metrics json, frames csv) for two measurable runs."""
    assert a.output and b.output and a.output_sha256 and b.output_sha256
    options = _options(truncate, resample_audio)
    json_path = csv_path = None
    if metrics_dir is not None:
        stem = pair_metrics_stem(a.key, b.key)
        json_path = Path(metrics_dir) / f"{stem}.json"
        csv_path = Path(metrics_dir) / f"{stem}.frames.csv"
        entry = _load_pair_cache(json_path, a.output_sha256, b.output_sha256, options)
        if entry is not None and csv_path.exists():
            return entry.result, True, json_path, csv_path
        csv_path.parent.mkdir(parents=True, exist_ok=True)
    from harness.collect.suite import measure_pair

    result = measure_pair(
        Path(a.output), Path(b.output), csv_path=csv_path, truncate=truncate, resample_audio=resample_audio
    )
    if json_path is not None and csv_path is not None:
        write_record(
            json_path,
            PairCache(
                key_a=a.key,
                key_b=b.key,
                sha256_a=a.output_sha256,
                sha256_b=b.output_sha256,
                options=options,
                result=result,
            ),
        )
        _write_stats_cache(Path(metrics_dir), a.key, a.output_sha256, result.stats_a)
        _write_stats_cache(Path(metrics_dir), b.key, b.output_sha256, result.stats_b)
    return result, False, json_path, csv_path


# ---------------------------------------------------------------------------- latents


LATENT_SUFFIXES = (".npz", ".npy", ".pt")


def latent_files(run_dir: Path) -> dict[int, Path]:
    """run_dir/latents/step_XXX.npz|.npy|.pt -> {step: path} (empty when the run saved none)."""
    folder = Path(run_dir) / "latents"
    found: dict[int, Path] = {}
    if not folder.is_dir():
        return found
    for p in sorted(folder.iterdir()):
        stem, suffix = p.stem, p.suffix.lower()
        if suffix in LATENT_SUFFIXES and stem.startswith("step_") and stem[5:].isdigit():
            found.setdefault(int(stem[5:]), p)
    return dict(sorted(found.items()))


def _arrays(obj: Any, path: Path) -> dict[str, np.ndarray]:
    """Named non-scalar arrays of a loaded latent file (scalars such as the sigma reached are skipped)."""
    if isinstance(obj, dict):
        items = obj.items()
    else:
        items = [("latent", obj)]
    out: dict[str, np.ndarray] = {}
    for name, value in items:
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().float().cpu().numpy()
        arr = np.asarray(value)
        if arr.ndim > 0 and arr.dtype.kind in "fiu":
            out[str(name)] = arr.astype(np.float64, copy=False)
    if not out:
        raise HarnessError(f"{path}: no latent array inside")
    return out


def load_latent(path: Path) -> dict[str, np.ndarray]:
    """{name: array} from step_XXX.npz (one entry per array), .npy or .pt (a tensor or a dict of them)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        try:
            loaded = np.load(path, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                return _arrays(loaded, path)
            with loaded as z:
                return _arrays({k: z[k] for k in z.files}, path)
        except (OSError, ValueError, EOFError) as err:
            raise HarnessError(f"{path}: cannot read latent ({err})") from None
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several kinds for a bad file
        raise HarnessError(f"{path}: cannot read latent ({' '.join(str(err).split())[:200]})") from None
    return _arrays(obj, path)


def latent_psnr(ref: np.ndarray, test: np.ndarray) -> tuple[float, float]:
    """(PSNR in dB with the reference's range as peak, max |diff|); see LATENT_CONVENTION."""
    ref = np.asarray(ref, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    if ref.shape != test.shape:
        raise HarnessError(f"latent shapes differ: {ref.shape} vs {test.shape}")
    diff = ref - test
    mse = float(np.mean(diff * diff))
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    if mse == 0.0:
        return math.inf, max_abs
    peak = float(np.max(ref) - np.min(ref)) or 1.0
    return 10.0 * math.log10(peak * peak / mse), max_abs


def latent_point(step: int, ref: dict[str, np.ndarray], test: dict[str, np.ndarray]) -> LatentPoint:
    """PSNR per named latent and over all of them together (flattened and concatenated)."""
    names = [n for n in ref if n in test]
    if not names:
        raise HarnessError(f"no latent in common (A has {sorted(ref)}, B has {sorted(test)})")
    parts = {n: latent_psnr(ref[n], test[n])[0] for n in names}
    if len(names) == 1:
        psnr, mad = latent_psnr(ref[names[0]], test[names[0]])
    else:
        psnr, mad = latent_psnr(
            np.concatenate([ref[n].ravel() for n in names]), np.concatenate([test[n].ravel() for n in names])
        )
    return LatentPoint(step=step, psnr=psnr, max_abs_diff=mad, parts=parts if len(names) > 1 else {})


def compare_latents(run_a: Path, run_b: Path) -> tuple[list[LatentPoint], list[str]]:
    """Latent PSNR of B against A at every step both runs saved."""
    la, lb = latent_files(run_a), latent_files(run_b)
    if not la or not lb:
        return [], []
    points: list[LatentPoint] = []
    notes: list[str] = []
    for step in sorted(set(la) & set(lb)):
        try:
            points.append(latent_point(step, load_latent(la[step]), load_latent(lb[step])))
        except HarnessError as err:
            notes.append(f"latent step {step}: {err}")
    if set(la) != set(lb):
        notes.append(f"latent steps differ: A has {len(la)}, B has {len(lb)}; compared {len(points)} common")
    return points, notes


# ---------------------------------------------------------------------------- compare


def _same_campaign_metrics(a: RunDir, b: RunDir) -> Path | None:
    """The campaign's metrics/ folder when both runs belong to the same campaign."""
    ca, cb = a.path.resolve().parent.parent, b.path.resolve().parent.parent
    if ca == cb and (ca / CAMPAIGN_JSON).exists():
        return ca / "metrics"
    return None


def _kind(a: RunSummary, b: RunSummary) -> str:
    if b.role == "noise_floor" or (
        b.attn_type == a.attn_type and b.kv_reversed and not a.kv_reversed and b.arm != a.arm
    ):
        return "noise_floor"
    if a.arm == b.arm and a.attn_type == b.attn_type and a.kv_reversed == b.kv_reversed:
        return "identical-arm"
    return "candidate"


def _speed(a: RunSummary, b: RunSummary) -> SpeedComparison:
    return SpeedComparison(
        s_per_step_ratio=_ratio(a.s_per_step, b.s_per_step),
        total_ratio=_ratio(a.pipeline_total_s, b.pipeline_total_s),
        step_ratios=[_ratio(a.step(i), b.step(i)) for i in (1, 2, 3)],
        s_per_step_line=one_liner("DiT s/step", a.s_per_step, b.s_per_step),
        total_line=one_liner("pipeline total", a.pipeline_total_s, b.pipeline_total_s),
    )


def compare_summaries(
    a: RunSummary,
    b: RunSummary,
    *,
    metrics_dir: Path | None = None,
    truncate: bool = False,
    resample_audio: bool = False,
) -> Comparison:
    """Compare two already summarised runs (the report reuses summaries across pairs)."""
    cmp = Comparison(
        kind=_kind(a, b),
        a=a.model_copy(),
        b=b.model_copy(),
        speed=_speed(a, b),
        options=_options(truncate, resample_audio),
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
        cmp.bitwise.audio = result.audio.bitwise_equal if result.audio is not None else None
        cmp.metrics_json = str(json_path) if json_path else None
        cmp.frames_csv = str(csv_path) if csv_path else None
        if result.audio is None:
            cmp.notes.append("no audio metrics (a run has no audio track)")
        if result.video.truncated_to is not None:
            cmp.notes.append(
                f"videos truncated to {result.video.truncated_to} frames "
                f"(A has {result.video.frames_a}, B has {result.video.frames_b})"
            )
        if result.audio is not None and result.audio.samples_dropped:
            cmp.notes.append(
                f"audio: {result.audio.samples_dropped} samples per channel dropped from the longer track"
            )
        if result.audio is not None and result.audio.resampled:
            cmp.notes.append(f"audio resampled: {result.audio.resample_note or 'on request'}")
    cmp.latents, latent_notes = compare_latents(Path(a.path), Path(b.path))
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
    """Compare run B against run A (the reference).

    Metrics are cached in ``metrics_dir`` (default: the campaign's metrics/ folder when both
    runs belong to one campaign, else no cache) and written there as <a>__vs__<b>.compare.json.
    """
    if metrics_dir is None:
        metrics_dir = _same_campaign_metrics(run_a, run_b)
    a, b = summarize_run(run_a), summarize_run(run_b)
    cmp = compare_summaries(a, b, metrics_dir=metrics_dir, truncate=truncate, resample_audio=resample_audio)
    if metrics_dir is not None:
        write_comparison(cmp, Path(metrics_dir))
    return cmp


def write_comparison(cmp: Comparison, metrics_dir: Path) -> Path:
    path = Path(metrics_dir) / f"{pair_metrics_stem(cmp.a.key, cmp.b.key)}.compare.json"
    write_record(path, cmp)
    return path


# Gates are defined next to the verdicts (harness.verdict); the CLI imports them from here.
# Imported on use, so that either module can be imported first.
def load_gate(path: Path):  # -> harness.verdict.Gate
    from harness.verdict import load_gate as _load

    return _load(path)


def check_gate(cmp: Comparison, gate) -> list[str]:
    from harness.verdict import check_gate as _check

    return _check(cmp, gate)


def __getattr__(name: str):
    if name == "Gate":
        from harness.verdict import Gate

        return Gate
    raise AttributeError(name)
