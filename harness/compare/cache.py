"""The one cache of costly results in metrics/ (a pair's metrics, a run's statistics, a pair's latent PSNR):
an entry is used only when its kind, version and key (sha256 of the files read, the settings) all match."""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from harness.collect.models import PairResult, RunStats
from harness.compare.hashes import FileHashes
from harness.compare.latents import LatentComparison, LatentPoint, compare_latent_files, latent_files
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.records import Record
from harness.safe_write import check_campaign_path, resolve_under
from harness.store import pair_metrics_stem, read_record, utcnow, write_record

M = TypeVar("M", bound=BaseModel)
CACHE_SCHEMA = "harness.cache/1"

# Bumped when the metric suite measures differently, so older entries are measured again (the
# history is git's; last: the per-frame colour track of each run's statistics).
PAIR_METRICS_VERSION = 7
STATS_VERSION = 4
LATENTS_VERSION = 1


class CacheEntry(Record):
    schema_version: str = Field(CACHE_SCHEMA, alias="schema")
    kind: str
    version: int
    key: dict[str, Any]
    created_at: str = Field(default_factory=utcnow)
    value: dict[str, Any]


def normal(key: dict[str, Any]) -> dict[str, Any]:
    """A key as it reads back from JSON (tuples as lists), so that equal keys compare equal."""
    return json.loads(json.dumps(key, sort_keys=True, default=str))


class MetricsCache:
    """``get`` a value of ``kind`` computed under ``key``, or ``put`` one (``folder`` None: no cache)."""

    def __init__(self, folder: Path | None):
        self.folder = Path(folder) if folder is not None else None

    def path(self, name: str, suffix: str = ".json") -> Path | None:
        if self.folder is None:
            return None
        return resolve_under(self.folder, f"{name}{suffix}", f"metrics cache entry {name!r}")

    def get(self, name: str, kind: str, version: int, key: dict[str, Any], model: type[M]) -> M | None:
        path = self.path(name)
        if path is None or not path.exists():
            return None
        try:
            entry = read_record(path, CacheEntry)
            expected = (CACHE_SCHEMA, kind, version, normal(key))
            if (entry.schema_version, entry.kind, entry.version, entry.key) != expected:
                return None
            return model.model_validate(entry.value)
        except (HarnessError, ValueError):
            return None  # an older or damaged entry is simply measured again

    def put(self, name: str, kind: str, version: int, key: dict[str, Any], value: BaseModel) -> bool:
        path = self.path(name)
        if path is None:
            return False
        value_json = value.model_dump(mode="json", by_alias=True)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_record(path, CacheEntry(kind=kind, version=version, key=normal(key), value=value_json))
        except OSError:  # a read-only campaign: not cached
            return False
        return True

    def cached(self, name: str, kind: str, version: int, key: dict[str, Any], model: type[M], compute) -> M:
        """The entry while it holds, else ``compute()`` put under ``key``."""
        hit = self.get(name, kind, version, key, model)
        if hit is None:
            hit = compute()
            self.put(name, kind, version, key, hit)
        return hit


def measure_options(truncate: bool, resample_audio: bool, lossless: bool = False) -> dict[str, bool]:
    return {"truncate": truncate, "resample_audio": resample_audio, "lossless": lossless}


def use_lossless(a: RunSummary, b: RunSummary) -> bool:
    """Pairs are measured on the lossless copies when both runs wrote one (before compression)."""
    return bool(a.lossless and a.lossless_sha256 and b.lossless and b.lossless_sha256)


def media(run: RunSummary, lossless: bool) -> tuple[str, str]:
    """(path, sha256) of the file a run is measured on (the caller has checked that it has one)."""
    if lossless:
        return run.lossless, run.lossless_sha256
    return run.output, run.output_sha256


def run_stats(run: RunSummary, metrics_dir: Path | None) -> RunStats | None:
    """Global statistics of one run's output (its lossless copy when it has one), cached by its hash."""
    if run.output is None or run.output_sha256 is None:
        return None
    file, sha = media(run, use_lossless(run, run))

    def measure() -> RunStats:
        from harness.collect.suite import measure_run

        return measure_run(Path(file))

    return MetricsCache(metrics_dir).cached(
        f"{run.key}.stats", "stats", STATS_VERSION, {"sha256": sha}, RunStats, measure
    )


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
    cache = MetricsCache(metrics_dir)
    stem = pair_metrics_stem(a.key, b.key)
    key = {"sha256_a": sha_a, "sha256_b": sha_b, "options": options}
    json_path, csv_path = cache.path(stem), cache.path(stem, ".frames.csv")
    if csv_path is not None and csv_path.exists():
        entry = cache.get(stem, "pair", PAIR_METRICS_VERSION, key, PairResult)
        if entry is not None:
            check_audio_length(entry, file_a, file_b, truncate)
            return entry, True, json_path, csv_path
    if csv_path is not None:
        with contextlib.suppress(OSError):
            csv_path.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(csv_path.parent, os.W_OK):
            csv_path = None  # a read-only campaign: measured, not kept
    from harness.collect.suite import measure_pair

    if csv_path is not None:
        check_campaign_path(csv_path)  # metrics/ linked out of the campaign: refused before measuring
    result = measure_pair(
        Path(file_a), Path(file_b), csv_path=csv_path, truncate=truncate, resample_audio=resample_audio
    )
    if csv_path is None or not cache.put(stem, "pair", PAIR_METRICS_VERSION, key, result):
        json_path = None
    for key_x, sha, stats in ((a.key, sha_a, result.stats_a), (b.key, sha_b, result.stats_b)):
        cache.put(f"{key_x}.stats", "stats", STATS_VERSION, {"sha256": sha}, stats)
    check_audio_length(result, file_a, file_b, truncate)
    return result, False, json_path, csv_path


def check_audio_length(result: PairResult, file_a: str, file_b: str, truncate: bool) -> None:
    """Audio tracks of other lengths are refused as videos of other frame counts are, unless ``truncate``
    (else a track missing most of its audio would be judged on the overlap)."""
    au = result.audio
    if au is not None and not truncate:
        samples, rates = (au.samples_a, au.samples_b), (au.sample_rate, au.rate_b or au.sample_rate)
        refuse_audio_lengths(file_a, file_b, samples, rates, result.video.fps)


def refuse_audio_lengths(
    a: object, b: object, samples: tuple[int, int], rates: tuple[int, int], fps: float, cli: bool = False
) -> None:
    """Raise when two tracks differ in length by more than one video frame (AAC pads to its frames), B's
    samples at its own rate (before any resampling); ``cli``: ``harness compare``'s words, naming its flag."""
    (samples_a, samples_b), (rate_a, rate_b) = samples, rates
    slack = math.ceil(rate_a / fps) if fps > 0 else rate_a  # one video frame's worth of samples
    if abs(samples_a - round(samples_b * rate_a / rate_b)) > slack:
        a_len, b_len = f"{samples_a / rate_a:.3f} s", f"{samples_b / rate_b:.3f} s"
        if cli:
            raise HarnessError(
                f"audio length differs: {a} has {a_len} of audio, {b} has {b_len} (--truncate compares the shorter)"
            )
        raise HarnessError(
            f"audio length differs: {a} has {a_len} ({samples_a} samples), {b} has {b_len} ({samples_b}) "
            "(truncate to compare the shorter)"
        )


def latents_cached(
    a: RunSummary, b: RunSummary, metrics_dir: Path | None, hashes: FileHashes
) -> tuple[list[LatentPoint], list[str]]:
    """Latent PSNR of B against A per step (``compare.latents``), cached by every latent file's hash."""
    la, lb = latent_files(Path(a.path)), latent_files(Path(b.path))
    if not la or not lb:
        return [], []
    key = {
        side: {str(step): hashes.sha256(p) for step, p in files.items()}
        for side, files in (("a", la), ("b", lb))
    }
    name = f"{pair_metrics_stem(a.key, b.key)}.latents"
    hit = MetricsCache(metrics_dir).cached(
        name, "latents", LATENTS_VERSION, key, LatentComparison, lambda: compare_latent_files(la, lb)
    )
    return hit.points, hit.notes
