"""What the page plays and shows of each run's audio (the first seed's) beyond the waveform figure:
``clip:<run>``, the first ``CLIP_SECONDS`` as Opus in WebM (every browser plays it, at a twentieth of
PCM), and ``specdiff:<run>``, its spectrogram minus the reference's, floored ``DYNAMIC_DB`` under the
reference's loudest cell (silence is no difference); cached under both tracks' sha256 and the settings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.analysis.audio_tracks import Tracks, first_seed_tracks
from harness.analysis.audio_view import SPEC_COLS, SPEC_ROWS, nfft_for, spectrogram_db
from harness.analysis.frames import Progress, cached_files_present, encode_png, slug, write_under
from harness.analysis.model import ClipSet, ReportResults, SpectrogramDiff
from harness.compare.cache import MetricsCache
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.media_audio import OPUS_BITRATE, opus_clip
from harness.records import Record

AUDIO_CLIPS_VERSION = 2  # 2: Opus in WebM (was 16-bit PCM WAV)
CLIP_SECONDS = 8.0
DIFF_DB = 20.0
DYNAMIC_DB = 80.0


class ClipAssets(Record):
    clip: str  # Opus in WebM, relative to the campaign
    clip_seconds: float = 0.0
    specdiff: str | None = None  # SpectrogramDiff JSON


def aligned(run: np.ndarray, ref: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """The two tracks over their overlap once ``run`` (delayed by ``lag`` samples) is moved back."""
    if lag > 0:
        run = run[lag:]
    elif lag < 0:
        ref = ref[-lag:]
    m = min(run.size, ref.size)
    return run[:m], ref[:m]


def spectrogram_difference(run: np.ndarray, ref: np.ndarray, rate: int) -> tuple[np.ndarray, float]:
    """(run dB - reference dB on audio_view's cells, clipped to +-DIFF_DB; the floor in dB)."""
    nfft = nfft_for(ref.size)
    a, b = spectrogram_db(ref, rate, nfft), spectrogram_db(run, rate, nfft)
    finite = a[np.isfinite(a)]
    floor = (float(finite.max()) if finite.size else 0.0) - DYNAMIC_DB
    n = min(a.shape[1], b.shape[1])
    a = np.maximum(np.nan_to_num(a[:, :n], neginf=floor), floor)
    b = np.maximum(np.nan_to_num(b[:, :n], neginf=floor), floor)
    return np.clip(b - a, -DIFF_DB, DIFF_DB), floor


def lag_of(res: ReportResults, run: RunSummary) -> int:
    c = res.comparison_for(run.key)
    return int(c.audio.lag_samples) if c is not None and c.audio is not None else 0


def write_assets(
    res: ReportResults,
    run: RunSummary,
    track: tuple[np.ndarray, int],
    ref: tuple[str, np.ndarray, int] | None,
    root: Path,
) -> ClipAssets:
    """The clip of ``run`` (mono mix, rate) and, given the reference's (key, mono mix, rate), its
    spectrogram difference."""
    mono, rate = track
    name = slug(run.key)
    clip = mono[: int(CLIP_SECONDS * rate)]
    out = ClipAssets(clip=f"assets/audio/{name}.clip.webm", clip_seconds=round(clip.size / rate, 4))
    what = f"audio of run {run.key!r}"
    write_under(root, out.clip, what, opus_clip(clip, rate))
    if ref is None:
        return out
    ref_name, ref_mono, ref_rate = ref
    if ref_rate != rate:
        return out
    lag = lag_of(res, run)
    a, b = aligned(mono, ref_mono, lag)
    diff, floor = spectrogram_difference(a, b, rate)
    png = f"assets/audio/{name}.specdiff.png"
    view = SpectrogramDiff(
        key=run.key,
        reference=ref_name,
        rate=rate,
        seconds=round(a.size / rate, 4),
        lag_samples=lag,
        png=png,
        hz=[0.0, rate / 2.0],
        db_range=DIFF_DB,
        floor_db=round(floor, 3),
        max_abs_db=round(float(np.abs(diff).max()) if diff.size else 0.0, 3),
        mean_abs_db=round(float(np.abs(diff).mean()) if diff.size else 0.0, 4),
    )
    grey = np.rint((diff + DIFF_DB) / (2 * DIFF_DB) * 255.0).astype(
        np.uint8
    )  # 0 = -DIFF_DB; top row: highest bin
    write_under(root, png, what, encode_png(np.flipud(grey)))
    out.specdiff = f"assets/audio/{name}.specdiff.json"
    write_under(root, out.specdiff, what, view.model_dump_json(by_alias=True) + "\n")
    return out


def audio_clips(res: ReportResults, root: Path, cache: MetricsCache, say: Progress) -> None:
    """``clip:<run>`` and ``specdiff:<run>`` for the first seed's runs; ``res.audio_clips``."""
    runs = first_seed_tracks(res)
    ref = runs[0] if runs and runs[0].arm == res.reference_arm else None
    tracks = Tracks()  # decoded mono mixes: the reference's and the current run's
    if ref is not None:
        tracks.pin(ref)
    longest = 0.0
    for r in runs:
        against = ref if ref is not None and r is not ref else None
        key = {
            "sha256": r.output_sha256,
            "reference_sha256": against.output_sha256 if against is not None else None,
            "lag": lag_of(res, r) if against is not None else 0,
            "clip_seconds": CLIP_SECONDS,
            "diff_db": DIFF_DB,
            "dynamic_db": DYNAMIC_DB,
            "cells": [SPEC_ROWS, SPEC_COLS],
        }
        name = f"{r.key}.audio_clip"
        hit = cache.get(name, "audio_clip", AUDIO_CLIPS_VERSION, key, ClipAssets)
        if hit is None or not cached_files_present(root, (hit.clip, hit.specdiff)):
            say(f"audio clip of {r.key}")
            try:
                given = (against.key, *tracks.get(against)) if against is not None else None
                hit = write_assets(res, r, tracks.get(r), given, root)
            except HarnessError as err:
                res.notes.append(f"audio clip: {r.key}: {err}")
                continue
            except OSError as err:
                res.notes.append(f"audio clip: {r.key}: not written ({err.strerror or err})")
                continue
            cache.put(name, "audio_clip", AUDIO_CLIPS_VERSION, key, hit)
        res.assets[f"clip:{r.key}"] = hit.clip
        if hit.specdiff:
            res.assets[f"specdiff:{r.key}"] = hit.specdiff
        longest = max(longest, hit.clip_seconds)
    if longest:
        res.audio_clips = ClipSet(
            seconds=longest,
            text=(
                f"the first {CLIP_SECONDS:g} s (at most) of each run's mono mix, Opus at {OPUS_BITRATE // 1000} "
                "kbit/s (lossy, for listening: the audio metrics read the tracks themselves); spectrogram difference = run minus reference in dB (the run moved back by the lag "
                f"the audio metrics found), both floored {DYNAMIC_DB:g} dB under the reference's loudest "
                f"cell, clipped to +-{DIFF_DB:g} dB"
            ),
        )
