"""The metrics cache of a campaign's metrics/ folder: a pair's metrics, a run's statistics and
its codec floor, reused while the sha256 of the output files they were measured on still match."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from harness.collect.codec_floor import CodecSettings
from harness.collect.models import PairResult, RunStats
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.records import Record
from harness.store import pair_metrics_stem, read_record, utcnow, write_record

# Bumped when the metric suite measures differently, so older entries are measured again.
# 2: audio metrics after the bounded lag search; 3: the streamed log-mel cosine on the aligned overlap.
PAIR_METRICS_VERSION = 3


class PairCache(Record):
    """metrics/<a>__vs__<b>.json: a pair's metrics and the output hashes they were measured on."""

    schema_version: str = Field("harness.pair_cache/1", alias="schema")
    metrics_version: int = 1
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


def measure_options(truncate: bool, resample_audio: bool, lossless: bool = False) -> dict[str, bool]:
    return {"truncate": truncate, "resample_audio": resample_audio, "lossless": lossless}


def use_lossless(a: RunSummary, b: RunSummary) -> bool:
    """Pairs are measured on the lossless copies when both runs wrote one (before compression)."""
    return bool(a.lossless and a.lossless_sha256 and b.lossless and b.lossless_sha256)


def media(run: RunSummary, lossless: bool) -> tuple[str, str]:
    """(path, sha256) of the file a run is measured on."""
    if lossless:
        assert run.lossless and run.lossless_sha256
        return run.lossless, run.lossless_sha256
    assert run.output and run.output_sha256
    return run.output, run.output_sha256


def _load_pair_cache(path: Path, sha_a: str, sha_b: str, options: dict[str, bool]) -> PairCache | None:
    if not path.exists():
        return None
    try:
        entry = read_record(path, PairCache)
    except HarnessError:
        return None  # an older or damaged entry is simply measured again
    if entry.sha256_a != sha_a or entry.sha256_b != sha_b or entry.options != options:
        return None
    if entry.metrics_version != PAIR_METRICS_VERSION:
        return None
    return entry


def _write_stats_cache(metrics_dir: Path, key: str, sha: str, stats: RunStats) -> None:
    write_record(metrics_dir / f"{key}.stats.json", StatsCache(key=key, sha256=sha, stats=stats))


def run_stats(run: RunSummary, metrics_dir: Path | None) -> RunStats | None:
    """Global statistics of one run's output (its lossless copy when it has one), from the cache
    when its hash still matches."""
    if run.output is None or run.output_sha256 is None:
        return None
    file, sha = media(run, use_lossless(run, run))
    if metrics_dir is not None:
        path = Path(metrics_dir) / f"{run.key}.stats.json"
        if path.exists():
            try:
                entry = read_record(path, StatsCache)
                if entry.sha256 == sha:
                    return entry.stats
            except HarnessError:
                pass
    from harness.collect.suite import measure_run

    stats = measure_run(Path(file))
    if metrics_dir is not None:
        _write_stats_cache(Path(metrics_dir), run.key, sha, stats)
    return stats


def measure_pair_cached(
    a: RunSummary,
    b: RunSummary,
    metrics_dir: Path | None,
    *,
    truncate: bool = False,
    resample_audio: bool = False,
) -> tuple[PairResult, bool, Path | None, Path | None]:
    """(result, from_cache, metrics json, frames csv) for two measurable runs, measured on their
    lossless copies when both have one (``measure_options(...)["lossless"]`` says which)."""
    lossless = use_lossless(a, b)
    (file_a, sha_a), (file_b, sha_b) = media(a, lossless), media(b, lossless)
    options = measure_options(truncate, resample_audio, lossless)
    json_path = csv_path = None
    if metrics_dir is not None:
        stem = pair_metrics_stem(a.key, b.key)
        json_path = Path(metrics_dir) / f"{stem}.json"
        csv_path = Path(metrics_dir) / f"{stem}.frames.csv"
        entry = _load_pair_cache(json_path, sha_a, sha_b, options)
        if entry is not None and csv_path.exists():
            return entry.result, True, json_path, csv_path
        csv_path.parent.mkdir(parents=True, exist_ok=True)
    from harness.collect.suite import measure_pair

    result = measure_pair(
        Path(file_a), Path(file_b), csv_path=csv_path, truncate=truncate, resample_audio=resample_audio
    )
    if json_path is not None and csv_path is not None:
        write_record(
            json_path,
            PairCache(
                key_a=a.key,
                key_b=b.key,
                sha256_a=sha_a,
                sha256_b=sha_b,
                options=options,
                metrics_version=PAIR_METRICS_VERSION,
                result=result,
            ),
        )
        _write_stats_cache(Path(metrics_dir), a.key, sha_a, result.stats_a)
        _write_stats_cache(Path(metrics_dir), b.key, sha_b, result.stats_b)
    return result, False, json_path, csv_path


class CodecFloor(Record):
    """metrics/<run>.codec_floor.json: the codec's own error on a run's output (collect.codec_floor)."""

    schema_version: str = Field("harness.codec_floor/1", alias="schema")
    key: str
    sha256: str  # of the output.mp4 measured
    method: str  # lossless | re-encode
    settings: CodecSettings
    decode: str = ""  # how the mp4's frames became RGB
    created_at: str = Field(default_factory=utcnow)
    result: PairResult


def codec_floor_cached(
    run: RunSummary, metrics_dir: Path | None, settings: CodecSettings
) -> CodecFloor | None:
    """The codec floor of a run's output, from the cache while the output (and the method) match."""
    if run.output is None or run.output_sha256 is None:
        return None
    method = "lossless" if run.lossless else "re-encode"
    path = Path(metrics_dir) / f"{run.key}.codec_floor.json" if metrics_dir is not None else None
    if path is not None and path.exists():
        try:
            entry = read_record(path, CodecFloor)
            if entry.sha256 == run.output_sha256 and entry.method == method and entry.settings == settings:
                return entry
        except HarnessError:
            pass
    from harness.collect.codec_floor import decode_convention, measure_codec_floor

    result, method = measure_codec_floor(run.output, settings, lossless=run.lossless)
    entry = CodecFloor(
        key=run.key,
        sha256=run.output_sha256,
        method=method,
        settings=settings,
        decode=decode_convention(run.output),
        result=result,
    )
    if path is not None:
        write_record(path, entry)
    return entry
