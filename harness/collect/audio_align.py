"""How two audio tracks are lined up before the waveform metrics, and the lag left after that.

The judged metrics are taken at the **container's alignment**: each track's first decoded sample at
its presentation time relative to its file's first video frame (FFmpeg drops a marked encoder priming;
an unmarked one carries its own timestamps). A bounded search then reports a **residual lag**
(``CONVENTION``), never removing it; a positive lag means B is late: ``b[n + lag]`` meets ``a[n]``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator

import numpy as np

MAX_LAG = 2048  # samples: 64 ms at 32 kHz, more than an AAC frame of priming
WINDOW = 1 << 19  # samples a streamed track's residual lag is found on (16 s at 32 kHz)
MIN_GAIN = 0.01  # normalised |correlation| a non-zero lag must add over lag 0
CHANCE_SIGMAS = 6.0

CONVENTION = (
    "alignment=the container's timestamps (first decoded audio sample's time minus the first video frame's, "
    "per file; FFmpeg drops a marked encoder priming); metrics judged at that alignment on the overlap; "
    f"residual lag=argmax over |l|<={MAX_LAG} samples of |sum_n a[n] b[n+l]| (channels summed, FFT), kept when "
    f"the normalised |correlation| gains > max({MIN_GAIN:g}, {CHANCE_SIGMAS:g}/sqrt(n)) over l=0; positive = B "
    "late; reported, not removed"
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


def lag_search(
    a: np.ndarray, b: np.ndarray, max_lag: int = MAX_LAG, min_gain: float = MIN_GAIN
) -> tuple[int, float, float]:
    """(lag, normalised correlation at that lag, at lag 0) of B against A (module docstring)."""
    x, y = _mono(a), _mono(b)
    norm = float(np.sqrt(np.dot(x, x) * np.dot(y, y)))  # 0 for an empty or silent track
    if norm == 0.0 or max_lag <= 0:
        return 0, 0.0, 0.0
    lags, c = cross_correlation(x, y, max_lag)
    i = int(np.argmax(np.abs(c)))
    zero = int(np.flatnonzero(lags == 0)[0])
    n = min(x.size, y.size)
    at_zero = float(c[zero]) / norm
    if (abs(c[i]) - abs(c[zero])) / norm > max(min_gain, CHANCE_SIGMAS / np.sqrt(n)):
        return int(lags[i]), float(c[i]) / norm, at_zero
    return 0, at_zero, at_zero


def overlap(a: np.ndarray, b: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """[C, S] tracks cut to the samples where ``b[n + lag]`` meets ``a[n]``, to equal length."""
    if lag > 0:
        b = b[:, lag:]
    elif lag < 0:
        a = a[:, -lag:]
    n = min(a.shape[1], b.shape[1])
    return a[:, :n], b[:, :n]


def audio_start(path: str | os.PathLike) -> float:
    """Seconds from the file's first video frame to its first decoded audio sample (0 for an audio
    file, or where a stream has no timestamps)."""
    import av

    from harness.media import SOUND_FILES, check_file

    p = check_file(path, "media file")
    if p.suffix.lower() in SOUND_FILES:
        return 0.0
    with av.open(str(p)) as c:
        if not c.streams.audio:
            return 0.0
        v = c.streams.video[0] if c.streams.video else None
        has_start = v is not None and v.start_time is not None and v.time_base is not None
        video_t = float(v.start_time * v.time_base) if has_start else 0.0
        audio_t = next((f.time for f in c.decode(c.streams.audio[0]) if f.time is not None), None)
    return 0.0 if audio_t is None else float(audio_t) - video_t


def container_lag(a: str | os.PathLike, b: str | os.PathLike, rate: int) -> int:
    """The lag (samples of ``rate``) lining the two files' tracks up by their timestamps (B later: negative)."""
    return round((audio_start(a) - audio_start(b)) * rate)


def peek(blocks: Iterable[np.ndarray], n: int = WINDOW) -> tuple[np.ndarray, Iterator[np.ndarray]]:
    """The first ``n`` samples [C, <=n] of streamed [C, S] blocks, and an iterator over every block."""
    it = iter(blocks)
    head: list[np.ndarray] = []
    got = 0
    while got < n and (x := next(it, None)) is not None:
        head.append(x)
        got += x.shape[1]
    first = np.concatenate(head, axis=1)[:, :n] if head else np.zeros((0, 0), np.float32)
    return first, itertools.chain(head, it)
