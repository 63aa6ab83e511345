"""Audio metrics on float32 [channels, samples] arrays (definitions: ``models.AUDIO_CONVENTION``; run A
the reference). The log-mel cosine survives phase drift but its 80 dB floor makes close audio read as
far as unrelated; the mel spectral error (loudness-weighted, phase-blind) has no floor: 0 for equal
tracks, about 10^(-SNR/10) for added noise, 0.5 or more for unrelated tracks (tests).

Alignment: the metrics are taken at the **container's alignment**: each track's first decoded sample at
its presentation time relative to its file's first video frame (FFmpeg drops a marked encoder priming;
an unmarked one carries its own timestamps). A bounded search then reports a **residual lag**
(``CONVENTION``), never removing it; a positive lag means B is late: ``b[n + lag]`` meets ``a[n]``.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Iterator

import numpy as np

N_FFT = 1024
HOP = 256
N_MELS = 64
DB_RANGE = 80.0


CHUNK = 1 << 18  # samples per float64 block: sums stay exact-ish without doubling memory


def _sums(a: np.ndarray, b: np.ndarray | None = None) -> tuple[float, float, float, float]:
    """sum a^2, sum b^2, sum a*b, sum (a-b)^2 in float64, block by block; ``np.einsum``, not ``np.dot``:
    the same sums without BLAS, whose thread pool would spin on every core of a large host."""
    x = np.asarray(a).reshape(-1)
    y = np.asarray(b).reshape(-1) if b is not None else None
    aa = bb = ab = ee = 0.0
    for i in range(0, x.size, CHUNK):
        u = x[i : i + CHUNK].astype(np.float64)
        aa += float(np.einsum("i,i->", u, u))
        if y is None:
            continue
        v = y[i : i + CHUNK].astype(np.float64)
        bb += float(np.einsum("i,i->", v, v))
        ab += float(np.einsum("i,i->", u, v))
        u -= v
        ee += float(np.einsum("i,i->", u, u))
    if y is None:
        return aa, aa, aa, 0.0
    return aa, bb, ab, ee


def _snr(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _cosine(aa: float, bb: float, ab: float) -> float:
    if aa == 0.0 and bb == 0.0:
        return 1.0
    if aa == 0.0 or bb == 0.0:
        return 0.0
    return ab / (math.sqrt(aa) * math.sqrt(bb))


def mel_filterbank(sample_rate: int, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """Triangular filters [n_mels, n_fft // 2 + 1], peak 1, edges evenly spaced in HTK mel."""
    freqs = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    top = 2595.0 * np.log10(1.0 + np.asarray(sample_rate / 2.0) / 700.0)  # HTK mel of Nyquist
    edges = 700.0 * (10.0 ** (np.linspace(0.0, top, n_mels + 2) / 2595.0) - 1.0)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None, :] - lo) / (mid - lo)
    down = (hi - freqs[None, :]) / (hi - mid)
    return np.maximum(0.0, np.minimum(up, down))


def _mel_frames(x: np.ndarray, window: np.ndarray, fb: np.ndarray, block: int = 512) -> np.ndarray:
    """Mel power float32 [channels, n_mels, frames] of every full STFT frame of x [C, S]."""
    n_frames = 1 + (x.shape[1] - N_FFT) // HOP if x.shape[1] >= N_FFT else 0
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT, axis=-1)[:, ::HOP]  # a view
    out = np.empty((x.shape[0], fb.shape[0], n_frames), np.float32)
    for f0 in range(0, n_frames, block):
        f1 = min(f0 + block, n_frames)
        # float32 FFT: ample for a similarity reading, and fast
        spec = np.fft.rfft(frames[:, f0:f1] * window, axis=-1)  # [C, f, bins]
        power = spec.real**2 + spec.imag**2
        # einsum, not matmul: no BLAS thread pool (see _sums)
        out[:, :, f0:f1] = np.einsum("mk,cfk->cmf", fb, power)
    return out


def _mel_setup(sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    window = (np.hanning(N_FFT + 1)[:-1]).astype(np.float32)  # periodic Hann
    return window, mel_filterbank(sample_rate).astype(np.float32)


def mel_power(x: np.ndarray, sample_rate: int, *, block: int = 512) -> np.ndarray:
    """Mel power [channels, n_mels, frames] of float [channels, samples] audio, ``block`` frames at a time."""
    x = np.asarray(x, np.float32)
    if x.ndim == 1:
        x = x[None]
    if x.shape[1] < N_FFT:
        x = np.pad(x, ((0, 0), (0, N_FFT - x.shape[1])))
    return _mel_frames(x, *_mel_setup(sample_rate), block=block).astype(np.float64)


class MelFrames:
    """Mel power frames kept as the pieces they were computed in, read a block at a time (never copied)."""

    def __init__(self, pieces: list[np.ndarray], frames: int | None = None):
        self.pieces = pieces
        self.frames = sum(p.shape[-1] for p in pieces) if frames is None else frames

    def max(self) -> float:
        top, start = 0.0, 0
        for p in self.pieces:
            part = p[..., : max(0, self.frames - start)]
            start += p.shape[-1]
            top = max(top, float(part.max(initial=0.0)))
        return top

    def block(self, f0: int, f1: int) -> np.ndarray:
        """Frames [f0, f1) (f1 at most ``frames``)."""
        f1, parts, start = min(f1, self.frames), [], 0
        for p in self.pieces:
            stop = start + p.shape[-1]
            if stop > f0 and start < f1:
                parts.append(p[..., max(f0 - start, 0) : f1 - start])
            start = stop
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def mel_figures(pa: MelFrames, pb: MelFrames, block: int = 2048) -> tuple[float, float]:
    """(the cosine of the floored dB spectrograms, the spectral error sum (sqrt pa - sqrt pb)^2 / sum pa),
    in float64 ``block`` frames at a time."""
    top = max(pa.max(), pb.max())  # 0: both silent, a cosine of 1
    floor = 10.0 * math.log10(top) - DB_RANGE if top > 0.0 else 0.0

    def db(p: np.ndarray) -> np.ndarray:
        return np.maximum(10.0 * np.log10(np.maximum(p, 1e-30)), floor) - floor

    aa = bb = ab = num = den = 0.0
    for f0 in range(0, pa.frames, block):
        x, y = (p.block(f0, f0 + block).astype(np.float64) for p in (pa, pb))
        if top > 0.0:
            s = _sums(db(x), db(y))
            aa, bb, ab = aa + s[0], bb + s[1], ab + s[2]
        xx, _, _, ee = _sums(np.sqrt(np.maximum(x, 0.0)), np.sqrt(np.maximum(y, 0.0)))
        num, den = num + ee, den + xx
    spectral = num / den if den != 0.0 else (0.0 if num == 0.0 else math.inf)
    return _cosine(aa, bb, ab) if top > 0.0 else 1.0, spectral


class TrackStream:
    """One track pushed block by block: sample count, sum of squares, peak, and its mel power frames
    (a quarter of the samples' memory; all that is kept besides the first N_FFT samples)."""

    def __init__(self, sample_rate: int, *, mel: bool = True):
        self.rate = sample_rate
        self.samples = 0
        self.channels: int | None = None
        self.sumsq = 0.0
        self.peak = 0.0
        self.head = np.zeros((0, 0), np.float32)  # the first N_FFT samples (short tracks)
        self._mel = _mel_setup(sample_rate) if mel else None
        self._tail: np.ndarray | None = None
        self._pieces: list[np.ndarray] = []

    def push(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float32)
        if self.channels is None:
            self.channels = x.shape[0]
            self.head = np.zeros((x.shape[0], 0), np.float32)
        elif x.shape[0] != self.channels:
            raise ValueError(f"channel count changed from {self.channels} to {x.shape[0]}")
        if self.head.shape[1] < N_FFT:
            self.head = np.concatenate([self.head, x[:, : N_FFT - self.head.shape[1]]], axis=1)
        self.samples += x.shape[1]
        self.sumsq += _sums(x)[0]
        if x.size:
            self.peak = max(self.peak, float(np.max(np.abs(x))))
        if self._mel is None:
            return
        buf = x if self._tail is None else np.concatenate([self._tail, x], axis=1)
        n_frames = 1 + (buf.shape[1] - N_FFT) // HOP if buf.shape[1] >= N_FFT else 0
        if n_frames:
            self._pieces.append(_mel_frames(buf[:, : (n_frames - 1) * HOP + N_FFT], *self._mel))
        self._tail = buf[:, n_frames * HOP :].copy()

    @property
    def rms(self) -> float:
        return math.sqrt(self.sumsq / (self.samples * (self.channels or 1))) if self.samples else 0.0

    def mel_prefix(self, n: int) -> MelFrames:
        """The mel power of the first n samples, as ``mel_power(x[:, :n])`` gives it."""
        if n < N_FFT:
            return MelFrames([mel_power(self.head[:, :n], self.rate)])
        return MelFrames(self._pieces, 1 + (n - N_FFT) // HOP)


class PairStream:
    """``pair_metrics`` of two equal-rate tracks pushed block by block, summed per channel in float64."""

    def __init__(self, sample_rate: int, lag: int = 0):
        self.rate = sample_rate
        self.lag = int(lag)  # the alignment (CONVENTION): the late track's head is not paired
        self._drop = [max(0, -self.lag), max(0, self.lag)]
        self._dropped = tuple(self._drop)
        # Whole tracks for RMS and peak; the mel frames come from the paired samples only (after
        # the late track's head is dropped), as pair_metrics takes them from the overlap.
        self.tracks = (TrackStream(sample_rate, mel=False), TrackStream(sample_rate, mel=False))
        self._mels = (TrackStream(sample_rate), TrackStream(sample_rate))
        self._pending: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        self._sums: np.ndarray | None = None  # [channels, 4]: aa, bb, ab, ee
        self._equal = True

    def push(self, which: int, x: np.ndarray) -> None:
        x = np.asarray(x, np.float32)
        self.tracks[which].push(x)  # whole-track statistics (RMS, peak) see every sample
        other = self.tracks[1 - which].channels
        if other is not None and other != x.shape[0]:
            raise ValueError(f"channel counts differ: {x.shape[0]} and {other}")
        if self._drop[which]:
            cut = min(self._drop[which], x.shape[1])
            self._drop[which] -= cut
            x = x[:, cut:]
            if not x.shape[1]:
                return
        self._mels[which].push(x)
        self._pending[which].append(x)
        self._pair()

    def _pair(self) -> None:
        pa, pb = self._pending
        while pa and pb:
            x, y = pa[0], pb[0]
            m = min(x.shape[1], y.shape[1])
            u, v = x[:, :m], y[:, :m]
            if self._sums is None:
                self._sums = np.zeros((x.shape[0], 4))
            for c in range(x.shape[0]):
                self._sums[c] += _sums(u[c], v[c])
            self._equal = self._equal and bool(np.array_equal(u, v))
            for q, z in ((pa, x), (pb, y)):
                if z.shape[1] == m:
                    q.pop(0)
                else:
                    q[0] = z[:, m:]

    @property
    def behind(self) -> int:
        """The track (0 or 1) with fewer samples so far: push to it next to keep memory flat."""
        return 0 if self.tracks[0].samples <= self.tracks[1].samples else 1

    def result(self) -> dict:
        """What ``pair_metrics`` returns for the two whole tracks."""
        ta, tb = self.tracks
        channels = ta.channels or tb.channels or 0
        sums = self._sums if self._sums is not None else np.zeros((channels, 4))
        aa, bb, ab, ee = (float(v) for v in sums.sum(axis=0))
        n = max(0, min(ta.samples - self._dropped[0], tb.samples - self._dropped[1]))
        logmel, spectral = mel_figures(self._mels[0].mel_prefix(n), self._mels[1].mel_prefix(n))
        return {
            "lag_samples": self.lag,
            "sample_rate": self.rate,
            "channels": int(channels),
            "samples_a": int(ta.samples),
            "samples_b": int(tb.samples),
            "samples_compared": int(n),
            "samples_dropped": int(abs(ta.samples - tb.samples)),
            "snr_db": _snr(aa, ee),
            "snr_db_per_channel": [_snr(float(sums[c, 0]), float(sums[c, 3])) for c in range(channels)],
            "cosine": _cosine(aa, bb, ab),
            "logmel_cosine": logmel,
            "spectral_error": spectral,
            "rms_a": ta.rms,
            "rms_b": tb.rms,
            "peak_a": ta.peak,
            "peak_b": tb.peak,
            "bitwise_equal": self._equal
            and not self.lag
            and ta.samples == tb.samples
            and ta.channels == tb.channels,
        }


def resample(x: np.ndarray, rate_from: int, rate_to: int) -> np.ndarray:
    """float32 [C, S] audio resampled with libswresample (through PyAV)."""
    import av

    if rate_from == rate_to:
        return np.asarray(x, np.float32)
    x = np.ascontiguousarray(x, np.float32)
    layout = {1: "mono", 2: "stereo"}.get(x.shape[0])
    if layout is None:
        raise ValueError(f"resampling supports 1 or 2 channels, got {x.shape[0]}")
    rs = av.AudioResampler(format="fltp", layout=layout, rate=rate_to)
    frame = av.AudioFrame.from_ndarray(x, format="fltp", layout=layout)
    frame.sample_rate = rate_from
    frame.pts = 0
    out = [f.to_ndarray() for f in rs.resample(frame)] + [f.to_ndarray() for f in rs.resample(None)]
    return np.concatenate(out, axis=1).astype(np.float32) if out else np.zeros((x.shape[0], 0), np.float32)


def pair_metrics(a: np.ndarray, b: np.ndarray, sample_rate: int, lag: int = 0) -> dict:
    """SNR/cosine/spectral metrics of two equal-rate whole tracks at the alignment ``lag`` (the module
    docstring's: the container's), on their overlap (``PairStream``); and the residual lag found after it."""
    pair = PairStream(sample_rate, lag)  # raises on differing channel counts
    pair.push(0, a)
    pair.push(1, b)
    ta, tb = overlap(a, b, lag)
    found = lag_search(ta[:, :WINDOW], tb[:, :WINDOW])
    return pair.result() | dict(
        zip(("residual_lag_samples", "residual_corr", "aligned_corr"), found, strict=True)
    )


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


def lag_search(a: np.ndarray, b: np.ndarray) -> tuple[int, float, float]:
    """(lag, normalised correlation at that lag, at lag 0) of B against A (module docstring)."""
    x, y = _mono(a), _mono(b)
    norm = float(np.sqrt(np.dot(x, x) * np.dot(y, y)))  # 0 for an empty or silent track
    if norm == 0.0:
        return 0, 0.0, 0.0
    lags, c = cross_correlation(x, y, MAX_LAG)
    i = int(np.argmax(np.abs(c)))
    zero = int(np.flatnonzero(lags == 0)[0])
    n = min(x.size, y.size)
    at_zero = float(c[zero]) / norm
    if (abs(c[i]) - abs(c[zero])) / norm > max(MIN_GAIN, CHANCE_SIGMAS / np.sqrt(n)):
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
