"""harness.collect.audio_align: the bounded lag search before the waveform metrics."""

from __future__ import annotations

import numpy as np
import pytest

from harness.collect.audio import pair_metrics
from harness.collect.audio_align import MAX_LAG, aligned, best_lag, cross_correlation, overlap, peek, skip

RATE = 32000


def _track(n: int = RATE, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / RATE
    tone = 0.3 * np.sin(2 * np.pi * 330 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return np.stack([tone, 0.5 * tone]).astype(np.float32) + rng.normal(0, 0.05, (2, n)).astype(np.float32)


def test_cross_correlation_matches_the_direct_sum():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(1, 200)), rng.normal(size=(1, 180))
    lags, c = cross_correlation(a, b, 30)
    for lag, value in zip(lags, c, strict=True):
        direct = sum(a[0, n] * b[0, n + lag] for n in range(200) if 0 <= n + lag < 180)
        assert value == pytest.approx(direct, abs=1e-9)


@pytest.mark.parametrize("lag", [0, 1, 37, -250, 1024])
def test_a_delayed_copy_is_found_and_aligned(lag):
    a = _track()
    b = np.roll(a, lag, axis=1)  # b[n + lag] == a[n]
    assert best_lag(a, b) == lag
    ta, tb, found = aligned(a, b)
    assert found == lag and ta.shape == tb.shape
    assert np.array_equal(ta[:, 2000:-2000], tb[:, 2000:-2000])


def test_unrelated_tracks_and_lags_beyond_the_bound_stay_at_zero():
    a, b = _track(seed=1), np.random.default_rng(9).normal(0, 0.1, (2, RATE))
    assert best_lag(a, b) == 0
    noise = np.random.default_rng(4).normal(0, 0.1, (2, RATE))
    assert best_lag(noise, np.roll(noise, MAX_LAG + 500, axis=1)) == 0  # outside the search: not chased
    assert best_lag(np.zeros((2, 100)), np.zeros((2, 100))) == 0
    assert overlap(np.ones((1, 10)), np.ones((1, 8)), -3)[0].shape == (1, 7)


def test_snr_is_taken_after_the_lag():
    a = _track()
    b = np.roll(a, 64, axis=1) + np.random.default_rng(3).normal(0, 0.003, a.shape).astype(np.float32)
    m = pair_metrics(a, b, RATE)
    assert m["lag_samples"] == 64 and m["snr_db"] > 30  # without the search: about 0 dB
    assert m["samples_compared"] == RATE - 64


def test_streamed_tracks_peek_and_skip():
    a = _track()
    blocks = [a[:, i : i + 3000] for i in range(0, a.shape[1], 3000)]
    head, rest = peek(blocks, 7000)
    assert np.array_equal(head, a[:, :7000])
    assert np.array_equal(np.concatenate(list(rest), axis=1), a)  # nothing lost
    late = np.roll(a, 300, axis=1)
    lag = best_lag(head, peek([late[:, i : i + 3000] for i in range(0, RATE, 3000)], 7000)[0])
    assert lag == 300
    trimmed = np.concatenate(list(skip([late[:, i : i + 3000] for i in range(0, RATE, 3000)], lag)), axis=1)
    assert np.array_equal(trimmed, late[:, 300:])
