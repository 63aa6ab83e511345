"""harness.collect.audio: tracks lined up by the containers' timestamps, the residual lag
searched after that and reported (never removed), the correlation's sign kept."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from collect_testutil import RATE, best_lag, make_video, scene, tone

from harness.collect.audio import (
    MAX_LAG,
    audio_start,
    container_lag,
    cross_correlation,
    lag_search,
    overlap,
    pair_metrics,
    peek,
)
from harness.collect.suite import measure_pair


def _track(n: int = RATE, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / RATE
    tone_ = 0.3 * np.sin(2 * np.pi * 330 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return np.stack([tone_, 0.5 * tone_]).astype(np.float32) + rng.normal(0, 0.05, (2, n)).astype(np.float32)


def test_cross_correlation_matches_the_direct_sum():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(1, 200)), rng.normal(size=(1, 180))
    lags, c = cross_correlation(a, b, 30)
    for lag, value in zip(lags, c, strict=True):
        direct = sum(a[0, n] * b[0, n + lag] for n in range(200) if 0 <= n + lag < 180)
        assert value == pytest.approx(direct, abs=1e-9)


@pytest.mark.parametrize("lag", [0, 1, 37, -250, 1024])
def test_a_delayed_copy_is_found_and_the_sign_is_kept(lag):
    a = _track()
    b = np.roll(a, lag, axis=1)  # b[n + lag] == a[n]
    assert best_lag(a, b) == lag
    found, corr, _ = lag_search(a, -b)  # inverted: the same lag, a correlation near -1
    assert found == lag and corr < -0.95


def test_unrelated_tracks_and_lags_beyond_the_bound_stay_at_zero():
    a, b = _track(seed=1), np.random.default_rng(9).normal(0, 0.1, (2, RATE))
    assert best_lag(a, b) == 0
    noise = np.random.default_rng(4).normal(0, 0.1, (2, RATE))
    assert best_lag(noise, np.roll(noise, MAX_LAG + 500, axis=1)) == 0  # outside the search: not chased
    assert best_lag(np.zeros((2, 100)), np.zeros((2, 100))) == 0
    assert overlap(np.ones((1, 10)), np.ones((1, 8)), -3)[0].shape == (1, 7)


def test_a_real_delay_is_a_finding_not_removed():
    """Audio 50 ms late, timestamps as usual: the lag search used to remove it (39 dB SNR, cosine
    0.99994); at the containers' alignment the metrics show it, and the residual lag names it."""
    a = _track()
    b = np.concatenate([np.zeros((2, 1600), np.float32), a[:, :-1600]], axis=1)
    m = pair_metrics(a, b, RATE)
    assert m["lag_samples"] == 0 and m["residual_lag_samples"] == 1600
    assert m["snr_db"] < 3 and abs(m["cosine"]) < 0.9 and m["residual_corr"] > 0.95


def test_inverted_audio_reads_minus_one():
    a = _track()
    m = pair_metrics(a, -a, RATE)
    assert m["cosine"] == pytest.approx(-1.0) and m["residual_lag_samples"] == 0 and m["snr_db"] < -6


def _late_stream(path: Path, frames: np.ndarray, audio: np.ndarray, start: int) -> Path:
    """An mp4 whose audio stream starts ``start`` samples after its video (as its timestamps say)."""
    with av.open(str(path), "w") as c:
        vs = c.add_stream("libx264", rate=24)
        vs.width, vs.height, vs.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        a = c.add_stream("aac", rate=RATE)
        a.layout = "stereo"
        for i, f in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(f, format="rgb24")
            vf.pts = i
            c.mux(vs.encode(vf))
        c.mux(vs.encode(None))
        for pos in range(0, audio.shape[1], 1024):
            af = av.AudioFrame.from_ndarray(np.ascontiguousarray(audio[:, pos : pos + 1024]), format="fltp",
                                            layout="stereo")  # fmt: skip
            af.sample_rate, af.pts = RATE, pos + start
            c.mux(a.encode(af))
        c.mux(a.encode(None))
    return path


def test_the_containers_timestamps_line_the_tracks_up(tmp_path: Path):
    frames, audio = scene(24), tone(24)
    a = make_video(tmp_path / "a.mp4", frames, audio)
    same = make_video(tmp_path / "b.mp4", frames, audio)
    assert audio_start(a) == 0.0 and container_lag(a, same, RATE) == 0
    late = _late_stream(tmp_path / "late.mp4", frames, audio, 1600)  # the file plays its audio 50 ms late
    assert audio_start(late) > 0 and container_lag(a, late, RATE) < 0
    m = measure_pair(a, late).audio
    assert m.lag_samples == container_lag(a, late, RATE)
    # what plays together is compared: the content is 50 ms late there, and that is reported
    assert m.residual_lag_samples == 1600 and m.snr_db < 5
    # the same audio placed by its timestamps where the reference has it compares as close as a re-encode
    early = np.concatenate([np.zeros((2, 1600), np.float32), audio], axis=1)
    shifted = _late_stream(tmp_path / "early.mp4", frames, early, -1600)
    ms = measure_pair(a, shifted).audio
    # a re-encode of the same audio at another AAC frame phase, as far from the reference as codec noise
    pad = np.concatenate([np.zeros((2, 512), np.float32), audio], axis=1)
    again = measure_pair(a, _late_stream(tmp_path / "again.mp4", frames, pad, -512)).audio
    assert ms.residual_lag_samples == again.residual_lag_samples == 0
    assert abs(ms.snr_db - again.snr_db) < 3 and ms.snr_db > m.snr_db + 5


def test_streamed_tracks_peek():
    a = _track()
    blocks = [a[:, i : i + 3000] for i in range(0, a.shape[1], 3000)]
    head, rest = peek(blocks, 7000)
    assert np.array_equal(head, a[:, :7000])
    assert np.array_equal(np.concatenate(list(rest), axis=1), a)  # nothing lost
    late = np.roll(a, 300, axis=1)
    assert best_lag(head, peek([late[:, i : i + 3000] for i in range(0, RATE, 3000)], 7000)[0]) == 300
