"""Bounded lag search before the waveform audio metrics (SNR, cosine, log-mel).

Two tracks that differ only by a few samples of delay (an encoder's priming left in, a
resampler's group delay) have a poor SNR that says nothing about their content. The lag is
the argmax of the cross-correlation of the channel-summed tracks within +-``max_lag``
samples, computed with one FFT; it is kept only when it raises the normalised correlation
over lag 0 by more than ``min_gain`` and by more than 6 / sqrt(samples) (about six times the
largest correlation two unrelated white tracks reach by chance), so two unrelated tracks are
not shifted by chance.
A positive lag means B is late: ``b[n + lag]`` lines up with ``a[n]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

MAX_LAG = 2048  # samples: 64 ms at 32 kHz, more than an AAC frame of priming
WINDOW = 1 << 19  # samples a streamed track's lag is found on (16 s at 32 kHz)
MIN_GAIN = 0.01  # normalised correlation a non-zero lag must add over lag 0
CHANCE_SIGMAS = 6.0

CONVENTION = (
    f"lag=argmax over |l|<={MAX_LAG} samples of sum_n a[n] b[n+l] (channels summed, FFT), kept when the "
    f"normalised correlation gains > max({MIN_GAIN:g}, {CHANCE_SIGMAS:g}/sqrt(n)) over l=0; positive = B late; "
    "metrics on the overlap"
)


def _mono(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x.sum(axis=0) if x.ndim == 2 else x


def cross_correlation(a: np.ndarray, b: np.ndarray, max_lag: int) -> tuple[np.ndarray, np.ndarray]:
    """(lags, c) with ``c[i] = sum_n a[n] b[n + lags[i]]`` over the samples both have, |lag| <= max_lag."""
    x, y = _mono(a), _mono(b)
    n = x.size + y.size - 1
    size = 1 << max(1, (n - 1).bit_length())
    full = np.fft.irfft(np.conj(np.fft.rfft(x, size)) * np.fft.rfft(y, size), size)
    hi = min(max_lag, y.size - 1)
    lo = min(max_lag, x.size - 1)
    lags = np.arange(-lo, hi + 1)
    return lags, full[lags % size]


def best_lag(a: np.ndarray, b: np.ndarray, max_lag: int = MAX_LAG, min_gain: float = MIN_GAIN) -> int:
    """The lag of B against A (see the module docstring); 0 for silent or too-short tracks."""
    x, y = _mono(a), _mono(b)
    if x.size == 0 or y.size == 0 or max_lag <= 0:
        return 0
    norm = float(np.sqrt(np.dot(x, x) * np.dot(y, y)))
    if norm == 0.0:
        return 0
    lags, c = cross_correlation(x, y, max_lag)
    i = int(np.argmax(c))
    zero = int(np.flatnonzero(lags == 0)[0])
    n = min(x.size, y.size)
    if (c[i] - c[zero]) / norm > max(min_gain, CHANCE_SIGMAS / np.sqrt(n)):
        return int(lags[i])
    return 0


def overlap(a: np.ndarray, b: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """[C, S] tracks cut to the samples where ``b[n + lag]`` meets ``a[n]``, to equal length."""
    if lag > 0:
        b = b[:, lag:]
    elif lag < 0:
        a = a[:, -lag:]
    n = min(a.shape[1], b.shape[1])
    return a[:, :n], b[:, :n]


def aligned(a: np.ndarray, b: np.ndarray, max_lag: int = MAX_LAG) -> tuple[np.ndarray, np.ndarray, int]:
    """(a, b, lag): both tracks on their common, lag-aligned span."""
    lag = best_lag(a, b, max_lag)
    ta, tb = overlap(a, b, lag)
    return ta, tb, lag


# Streamed tracks ([C, S] blocks, e.g. media.iter_audio): find the lag on a bounded head, then
# drop the leading samples of the late track before pairing.


def peek(blocks: Iterable[np.ndarray], n: int = WINDOW) -> tuple[np.ndarray, Iterator[np.ndarray]]:
    """(the first ``n`` samples [C, <=n], an iterator over every block, those included)."""
    it = iter(blocks)
    head: list[np.ndarray] = []
    got = 0
    while got < n:
        x = next(it, None)
        if x is None:
            break
        head.append(x)
        got += x.shape[1]

    def chained() -> Iterator[np.ndarray]:
        yield from head
        yield from it

    first = np.concatenate(head, axis=1)[:, :n] if head else np.zeros((0, 0), np.float32)
    return first, chained()


def skip(blocks: Iterable[np.ndarray], n: int) -> Iterator[np.ndarray]:
    """The blocks without their first ``n`` samples."""
    left = max(0, int(n))
    for x in blocks:
        if left >= x.shape[1]:
            left -= x.shape[1]
            continue
        yield x[:, left:] if left else x
        left = 0
