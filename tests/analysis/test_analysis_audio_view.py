"""harness.analysis.audio_view: the audio figure's data, measured once (envelopes and spectrogram)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from matplotlib import mlab

from harness.analysis.audio_view import DB_FLOOR, binned, envelope, nfft_for, psd_frames, spectrogram_png


def tone(rate: int = 16000, seconds: float = 1.0, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return 0.5 * np.sin(2 * np.pi * hz * t) + 0.01 * np.random.default_rng(0).standard_normal(t.size)


def test_psd_is_matplotlibs_specgram():
    x, rate = tone(), 16000
    nfft = nfft_for(x.size)
    ours = psd_frames(x, rate, nfft)
    theirs, freqs, _ = mlab.specgram(x, NFFT=nfft, Fs=rate, noverlap=nfft // 2)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-15)
    assert freqs[np.argmax(ours.mean(axis=1))] == pytest.approx(440.0, abs=rate / nfft)


def test_envelope_keeps_the_peaks():
    x = np.zeros(10_000)
    x[1234], x[8000] = 0.9, -0.8
    env = envelope(x, 1000, bins=100)
    assert len(env.t) == len(env.lo) == len(env.hi) == 100 and env.t[1] == pytest.approx(0.1)
    assert max(env.hi) == pytest.approx(0.9) and min(env.lo) == pytest.approx(-0.8)


def test_binned_is_a_mean_of_power_and_the_png_spans_the_range():
    spec = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(binned(spec, 3, 2), [[0.5, 2.5], [4.5, 6.5], [8.5, 10.5]])
    png, hz, db = spectrogram_png(tone(), 16000)
    grey = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
    assert grey.ndim == 2 and grey.shape[0] <= 128 and grey.shape[1] <= 400
    assert hz == [0.0, 8000.0] and db[0] == DB_FLOOR and db[1] > DB_FLOOR
    row = int(np.argmax(grey.mean(axis=1)))  # the top row is the highest frequency
    assert (grey.shape[0] - 1 - row) * 8000 / grey.shape[0] == pytest.approx(
        440, abs=8000 / grey.shape[0] * 1.5
    )
