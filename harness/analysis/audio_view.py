"""What the audio figure draws of each run's track (the first seed's), cached under its output's and
the reference's sha256: the mono mix's waveform envelope, its difference to the reference's
(``AudioView``), and its spectrogram as an 8-bit PNG (``specgram``'s dB, binned, from ``DB_FLOOR``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from harness.analysis.audio_tracks import ENVELOPE_BINS, Tracks, envelope, first_seed_tracks
from harness.analysis.frames import Progress, cached_files_present, encode_png, slug, write_under
from harness.analysis.model import AudioView, ReportResults
from harness.compare.cache import MetricsCache
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.records import Record

AUDIO_VIEW_VERSION = 1
SPEC_ROWS, SPEC_COLS = 128, 400
DB_FLOOR = -140.0


class AudioAssets(Record):
    view: str  # AudioView JSON, relative to the campaign
    spectrogram: str | None = None


def nfft_for(samples: int) -> int:
    return 1024 if samples >= 2048 else max(16, 2 ** int(math.log2(max(samples // 2, 16))))


def psd_frames(mono: np.ndarray, rate: int, nfft: int) -> np.ndarray:
    """[frequency bin, segment] power spectral density, as ``matplotlib.mlab.specgram`` computes it
    (Hann window, half-overlapping segments, one-sided, scaled by frequency)."""
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
    diff = envelope(mono, rate, minus=ref) if ref is not None else None
    view = AudioView(
        key=run.key,
        rate=rate,
        seconds=mono.size / float(rate),
        signal=envelope(mono, rate),
        minus_reference=diff,
        spectrogram=assets.spectrogram,
        spectrogram_hz=hz,
        spectrogram_db=db,
    )
    what = f"audio of run {run.key!r}"
    write_under(root, str(assets.spectrogram), what, png)
    write_under(root, assets.view, what, view.model_dump_json(by_alias=True) + "\n")
    return assets


def audio_views(res: ReportResults, root: Path, cache: MetricsCache, say: Progress) -> None:
    """``audio:<run>`` assets for the first seed's runs, the reference first (the others' differences
    are taken to the first track)."""
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
