"""Bounded memory: media over the frame-size or duration limit is refused in one line before it is
decoded, and the report's audio stage holds at most two decoded tracks and never the whole
track's spectrogram frames (its memory is a few tracks', not tens)."""

from __future__ import annotations

import tracemalloc
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from cli_testutil import harness, the_error_line

from harness.analysis.audio_view import (
    audio_clips,
    audio_views,
    binned,
    nfft_for,
    psd_frames,
    spectrogram_difference,
    spectrogram_png,
)
from harness.analysis.model import ReportResults
from harness.compare.cache import MetricsCache
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.media import iter_audio, iter_frames, probe, read_audio, read_mono, write_av

RATE = 48000


def chord(seconds: float, salt: int) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    left = 0.3 * np.sin(2 * np.pi * 220.0 * t) + 0.01 * np.random.default_rng(salt).standard_normal(t.size)
    return np.stack([left, 0.2 * np.sin(2 * np.pi * 330.0 * t + salt)]).astype(np.float32)


def av_file(path: Path, seconds: float, salt: int = 0, channels: int = 2) -> Path:
    """Two frames and ``seconds`` of 48 kHz audio (the audio is what grows with a long campaign)."""
    frames = [np.full((64, 64, 3), 40 * i, np.uint8) for i in range(2)]
    write_av(path, frames, chord(seconds, salt)[:channels], fps=24, sample_rate=RATE)
    return path


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- the audio stage of a report ---------------------------------------------------------------------


def test_the_spectrogram_is_taken_in_blocks_and_equals_the_whole_track_one() -> None:
    mono = chord(60.0, 1).mean(axis=0)  # 1 minute: 2.9 M samples, 11.5 MB as float32
    small = mono[: 10 * RATE].astype(np.float64)
    whole = binned(psd_frames(small, RATE, nfft_for(small.size)), 128, 400)
    png, hz, db = spectrogram_png(small, RATE)
    assert hz == [0.0, RATE / 2] and db[1] > db[0]
    from harness.analysis.audio_view import binned_psd

    np.testing.assert_allclose(binned_psd(small, RATE, nfft_for(small.size)), whole, rtol=1e-10)
    # the whole track's frames are 16 bytes a sample as float64 and twice that as spectra
    assert peak_bytes(lambda: spectrogram_png(mono, RATE)) < mono.nbytes
    assert peak_bytes(lambda: spectrogram_difference(mono, mono[::-1], RATE)) < mono.nbytes


def test_the_audio_stage_holds_two_tracks_at_most(tmp_path: Path) -> None:
    seconds = 20.0  # mono (AAC encoding is the cost of this test)
    arms = [("ref", "reference"), ("floor", "noise_floor"), ("cand", "candidate")]
    runs = [
        RunSummary(key=arm, path=str(tmp_path / arm), arm=arm, seed=42, role=role, status="ok",
                   output=str(av_file(tmp_path / arm / "output.mp4", seconds, i, 1)), output_sha256=f"{i:064x}")
        for i, (arm, role) in enumerate(arms)
    ]  # fmt: skip
    res = ReportResults(campaign_id="c", campaign_path=str(tmp_path), scenario_name="s", runner="builtin",
                        reference_arm="ref", seeds=[42], runs=runs)  # fmt: skip
    mono, rate = read_mono(runs[0].output)
    assert rate == RATE and mono.size >= seconds * RATE
    np.testing.assert_array_equal(mono, read_audio(runs[0].output)[0].mean(axis=0))
    cache = MetricsCache(tmp_path / "metrics")
    said: list[str] = []

    def stage() -> None:
        audio_views(res, tmp_path, cache, said.append)
        audio_clips(res, tmp_path, cache, said.append)

    peak = peak_bytes(stage)
    assert not res.notes, res.notes
    assert {f"audio:{a}" for a, _ in arms} | {f"clip:{a}" for a, _ in arms} <= set(res.assets)
    assert {f"specdiff:{a}" for a in ("floor", "cand")} <= set(res.assets)
    # two decoded mono tracks (float32), one being read, and a bounded block of spectra (about 7 MB);
    # holding every track and the whole track's spectra is more than 15 tracks
    assert peak < 8 * mono.nbytes, f"{peak / 1e6:.0f} MB for tracks of {mono.nbytes / 1e6:.0f} MB"


# --- limits on what is decoded -------------------------------------------------------------------------


def test_a_frame_over_the_size_limit_is_refused_in_a_line(tmp_path: Path, monkeypatch) -> None:
    big = tmp_path / "big.mp4"
    write_av(big, [np.zeros((4320, 7680, 3), np.uint8)], fps=24)  # 8K UHD: 33 Mpixel
    for read in (probe, lambda p: next(iter_frames(p))):
        with pytest.raises(HarnessError, match=r"7680x4320 \(33\.2 Mpixel\), over the limit of 16\.8 Mpixel"):
            read(big)
    res = harness("compare", big, big)
    line = the_error_line(res)
    assert "big.mp4: frames are 7680x4320" in line and "HARNESS_MAX_FRAME_PIXELS" in line, line
    assert res.returncode == 2
    small = av_file(tmp_path / "small.mp4", 0.1)
    monkeypatch.setenv("HARNESS_MAX_FRAME_PIXELS", "1000")  # the limit is the user's to move
    with pytest.raises(HarnessError, match="64x64"):
        next(iter_frames(small))
    monkeypatch.setenv("HARNESS_MAX_FRAME_PIXELS", "lots")
    with pytest.raises(HarnessError, match="HARNESS_MAX_FRAME_PIXELS='lots': expected a positive number"):
        probe(small)


def test_media_over_the_duration_limit_is_refused_while_decoding(tmp_path: Path, monkeypatch) -> None:
    f = av_file(tmp_path / "a.mp4", 3.0)
    monkeypatch.setenv("HARNESS_MAX_MEDIA_SECONDS", "2")
    for read in (read_audio, read_mono, lambda p: list(iter_audio(p))):
        with pytest.raises(HarnessError, match=r"a\.mp4: audio lasts 2 s or more, over the limit of 2 s"):
            read(f)
    monkeypatch.setenv("HARNESS_MAX_MEDIA_SECONDS", "0.05")  # two frames at 24 fps: 0.083 s
    with pytest.raises(HarnessError, match="over the limit of 0.05 s"):
        list(iter_frames(f))


def test_audio_is_written_from_blocks_as_from_one_array(tmp_path: Path) -> None:
    """The codec floor re-encodes a run from ``iter_audio`` blocks: the track is never held whole,
    and the file decodes to the same samples as one written from the whole array."""
    frames = [np.full((64, 64, 3), 20 * i, np.uint8) for i in range(12)]
    audio = chord(0.5, 3)
    whole, blocks = tmp_path / "whole.mp4", tmp_path / "blocks.mp4"
    write_av(whole, frames, audio, fps=24, sample_rate=RATE)
    cuts = [0, 700, 701, 5000, 9999, audio.shape[1]]  # blocks that end inside the encoder's frames
    write_av(blocks, frames, (audio[:, a:b] for a, b in pairwise(cuts)), fps=24, sample_rate=RATE)
    np.testing.assert_array_equal(read_audio(whole)[0], read_audio(blocks)[0])
    bad = (b for b in (audio[:, :100], np.full((2, 10), np.nan, np.float32)))
    with pytest.raises(HarnessError, match="audio contains NaN or Inf"):
        write_av(tmp_path / "bad.mp4", frames, bad, fps=24, sample_rate=RATE)
    assert not (tmp_path / "bad.mp4").exists() and not list(tmp_path.glob(".bad.mp4.*"))
