"""The audio the page shows of each run (the first seed's), cached under its output's and the reference's
sha256: ``audio:<run>``, the waveform envelope, its difference to the reference's and its spectrogram;
``clip:<run>``, the first ``CLIP_SECONDS`` as Opus; ``specdiff:<run>``, its spectrogram minus the
reference's. At most two decoded tracks are held (a 10-minute 48 kHz track is 115 MB as float32)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.frames import Progress, cached_files_present, encode_png, slug, write_under
from harness.analysis.model import AudioView, ClipSet, Envelope, ReportResults, SpectrogramDiff
from harness.collect.audio import overlap
from harness.compare.cache import MetricsCache
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.media_audio import OPUS_BITRATE, opus_clip
from harness.records import Record

AUDIO_VIEW_VERSION = 1
SPEC_ROWS, SPEC_COLS = 128, 400
DB_FLOOR = -140.0
ENVELOPE_BINS = 1500
ENVELOPE_BLOCK = 64  # bins per block of an envelope: a block's samples are a copy at most
AUDIO_CLIPS_VERSION = 2  # 2: Opus in WebM (was 16-bit PCM WAV)
CLIP_SECONDS = 8.0
DIFF_DB = 20.0
DYNAMIC_DB = 80.0


class AudioAssets(Record):
    view: str  # AudioView JSON, relative to the campaign
    spectrogram: str | None = None


class ClipAssets(Record):
    clip: str  # Opus in WebM, relative to the campaign
    clip_seconds: float = 0.0
    specdiff: str | None = None  # SpectrogramDiff JSON


class Tracks:
    """Mono mixes by run key: the ``pinned`` one kept, any other only until the next is asked for."""

    def __init__(self) -> None:
        self.pinned: str | None = None
        self._held: dict[str, tuple[np.ndarray, int]] = {}

    def get(self, run: RunSummary) -> tuple[np.ndarray, int]:
        if run.key not in self._held:
            for old in [k for k in self._held if k != self.pinned]:
                del self._held[old]  # before decoding: the two never overlap in memory
            from harness.media import read_mono

            self._held[run.key] = read_mono(str(run.output))
        return self._held[run.key]

    def pin(self, run: Any) -> Any:
        """Keep ``run``'s track (a ``RunSummary``) from now on; returns the run."""
        self.pinned = run.key
        return run


def first_seed_tracks(res: ReportResults) -> list[RunSummary]:
    """The first seed's runs (first repeats) with an output, the reference's first."""
    return [r for r in res.first_seed_runs if r.ok and r.output and r.output_sha256]


def envelope(
    x: np.ndarray, rate: int, bins: int = ENVELOPE_BINS, minus: np.ndarray | None = None
) -> Envelope:
    """Min/max per bin of ``x`` (minus ``minus``, in float64): long tracks plot quickly, peaks kept."""
    n = min(x.size, minus.size) if minus is not None else x.size
    bins = max(1, min(bins, n))
    edges = np.linspace(0, n, bins + 1).astype(int)
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    for i in range(0, bins if n else 0, ENVELOPE_BLOCK):
        j = min(i + ENVELOPE_BLOCK, bins)
        start, stop = int(edges[i]), int(edges[j])
        block = x[start:stop] if minus is None else x[start:stop].astype(np.float64) - minus[start:stop]
        local = edges[i:j] - start
        lo.append(np.minimum.reduceat(block, local))
        hi.append(np.maximum.reduceat(block, local))
    low = np.concatenate(lo) if lo else np.zeros(0)
    high = np.concatenate(hi) if hi else np.zeros(0)
    return Envelope(
        t=[round(float(i) / rate, 6) for i in edges[: low.size]],
        lo=[round(float(v), 5) for v in low],
        hi=[round(float(v), 5) for v in high],
    )


def nfft_for(samples: int) -> int:
    return 1024 if samples >= 2048 else max(16, 2 ** int(math.log2(max(samples // 2, 16))))


def psd_frames(mono: np.ndarray, rate: int, nfft: int) -> np.ndarray:
    """[frequency bin, segment] power spectral density, as ``matplotlib.mlab.specgram`` computes it."""
    step = nfft - nfft // 2
    if mono.size < nfft:
        mono = np.pad(mono, (0, nfft - mono.size))
    count = (mono.size - nfft // 2) // step
    window = np.hanning(nfft)
    segs = np.lib.stride_tricks.sliding_window_view(mono, nfft)[::step][:count] * window
    spec = np.abs(np.fft.rfft(segs, axis=1)) ** 2 / (rate * float((window**2).sum()))
    spec[:, 1 : (nfft + 1) // 2] *= 2.0  # one-sided: every bin but DC (and Nyquist for an even nfft)
    return spec.T


def binned(spec: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Mean power over at most ``rows`` x ``cols`` cells."""
    for axis, n in ((0, rows), (1, cols)):
        if spec.shape[axis] > n:
            edges = np.linspace(0, spec.shape[axis], n + 1).astype(int)[:-1]
            counts = np.diff(np.append(edges, spec.shape[axis]))
            spec = np.add.reduceat(spec, edges, axis=axis) / np.expand_dims(counts, 1 - axis)
    return spec


PSD_BLOCK = 256  # segments a batch: the spectra in memory are this many, whatever the track's length


def binned_psd(
    mono: np.ndarray, rate: int, nfft: int, rows: int = SPEC_ROWS, cols: int = SPEC_COLS
) -> np.ndarray:
    """``binned(psd_frames(mono, rate, nfft), rows, cols)`` taken a batch of segments at a time."""
    step = nfft - nfft // 2
    count = (mono.size - nfft // 2) // step if mono.size >= nfft else 0
    if count <= PSD_BLOCK:
        return binned(psd_frames(mono, rate, nfft), rows, cols)
    edges = np.linspace(0, count, min(cols, count) + 1).astype(int)  # the columns' first segments
    total = np.zeros((nfft // 2 + 1, edges.size - 1))
    for first in range(0, count, PSD_BLOCK):
        last = min(first + PSD_BLOCK, count)
        spec = psd_frames(mono[first * step : (last - 1) * step + nfft], rate, nfft)
        column = np.searchsorted(edges, np.arange(first, last), side="right") - 1
        starts = np.flatnonzero(np.diff(column, prepend=-1))
        total[:, column[starts]] += np.add.reduceat(spec, starts, axis=1)
    return binned(total / np.diff(edges), rows, cols)


def spectrogram_db(mono: np.ndarray, rate: int, nfft: int) -> np.ndarray:
    """The binned spectrogram in dB ([bin, segment]; -inf where the power is 0)."""
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(binned_psd(mono, rate, nfft))


def spectrogram_png(mono: np.ndarray, rate: int) -> tuple[bytes, list[float], list[float]]:
    """(8-bit PNG, [lowest, highest] Hz, [dB of grey 0, dB of grey 255]); the top row is the highest bin."""
    db = spectrogram_db(mono, rate, nfft_for(mono.size))
    finite = db[np.isfinite(db)]
    top = max(float(finite.max()) if finite.size else DB_FLOOR, DB_FLOOR + 1.0)
    grey = np.rint(
        (np.clip(np.nan_to_num(db, neginf=DB_FLOOR), DB_FLOOR, top) - DB_FLOOR) / (top - DB_FLOOR) * 255
    )
    return encode_png(np.flipud(grey.astype(np.uint8))), [0.0, rate / 2.0], [DB_FLOOR, round(top, 3)]


def write_view(
    run: RunSummary, mono: np.ndarray, rate: int, ref: np.ndarray | None, root: Path
) -> AudioAssets:
    name = slug(run.key)
    png, hz, db = spectrogram_png(mono, rate)
    assets = AudioAssets(view=f"assets/audio/{name}.json", spectrogram=f"assets/audio/{name}.spectrogram.png")
    view = AudioView(
        key=run.key,
        rate=rate,
        seconds=mono.size / float(rate),
        signal=envelope(mono, rate),
        minus_reference=envelope(mono, rate, minus=ref) if ref is not None else None,
        spectrogram=assets.spectrogram,
        spectrogram_hz=hz,
        spectrogram_db=db,
    )
    what = f"audio of run {run.key!r}"
    write_under(root, str(assets.spectrogram), what, png)
    write_under(root, assets.view, what, view.model_dump_json(by_alias=True) + "\n")
    return assets


def audio_views(res: ReportResults, root: Path, cache: MetricsCache, say: Progress) -> None:
    """``audio:<run>`` assets for the first seed's runs, the others' differences taken to the first's."""
    tracks = Tracks()  # decoded mono mixes: the first one's and the current one's
    first: RunSummary | None = None  # the track the others are set against
    for r in first_seed_tracks(res):
        key = {
            "sha256": r.output_sha256,
            "reference_sha256": first.output_sha256 if first is not None else None,
            "bins": ENVELOPE_BINS,
            "cells": [SPEC_ROWS, SPEC_COLS],
        }
        name = f"{r.key}.audio_view"
        hit = cache.get(name, "audio_view", AUDIO_VIEW_VERSION, key, AudioAssets)
        if hit is None or not cached_files_present(root, (hit.view, hit.spectrogram)):
            say(f"audio of {r.key}")
            try:
                mono, rate = tracks.get(r)
                ref_mono, ref_rate = tracks.get(first) if first is not None else (None, None)
            except HarnessError as err:
                res.notes.append(f"audio figure: {r.key}: {err}")
                continue
            try:
                hit = write_view(r, mono, rate, ref_mono if ref_rate == rate else None, root)
            except OSError as err:
                res.notes.append(f"audio figure: {r.key}: not written ({err.strerror or err})")
                continue
            cache.put(name, "audio_view", AUDIO_VIEW_VERSION, key, hit)
        res.assets[f"audio:{r.key}"] = hit.view
        if hit.spectrogram:
            res.assets[f"spectrogram:{r.key}"] = hit.spectrogram
        first = first or tracks.pin(r)


def aligned(run: np.ndarray, ref: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """The two mono tracks over their overlap once ``run`` (delayed by ``lag`` samples) is moved back."""
    ref_part, run_part = overlap(ref[None], run[None], lag)
    return run_part[0], ref_part[0]


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
    """The clip of ``run`` and, given the reference's (key, mono mix, rate), its spectrogram difference."""
    mono, rate = track
    name = slug(run.key)
    clip = mono[: int(CLIP_SECONDS * rate)]
    out = ClipAssets(clip=f"assets/audio/{name}.clip.webm", clip_seconds=round(clip.size / rate, 4))
    what = f"audio of run {run.key!r}"
    write_under(root, out.clip, what, opus_clip(clip, rate))
    if ref is None or ref[2] != rate:
        return out
    ref_name, ref_mono, _ = ref
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
    # 0 = -DIFF_DB; top row: highest bin
    grey = np.rint((diff + DIFF_DB) / (2 * DIFF_DB) * 255.0).astype(np.uint8)
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
