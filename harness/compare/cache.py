"""The metrics cache of a campaign's metrics/ folder: a pair's metrics and a run's statistics,
reused while the sha256 of the output files they were measured on still match."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from harness.collect.models import PairResult, RunStats
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.records import Record
from harness.store import pair_metrics_stem, read_record, utcnow, write_record


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


def measure_options(truncate: bool, resample_audio: bool) -> dict[str, bool]:
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
    options = measure_options(truncate, resample_audio)
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
