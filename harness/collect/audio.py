"""Audio metrics on float32 [channels, samples] arrays: SNR, cosine, RMS/peak, log-mel cosine.

Conventions (also in ``models.AUDIO_CONVENTION``):

* SNR = 10 log10(sum ref^2 / sum (ref - test)^2) over all channels, run A the reference.
  Equal signals (silence included) give +inf; a silent reference against a non-silent test
  gives -inf.
* cosine = <a, b> / (|a| |b|) over all samples of all channels; 1.0 when both are silent,
  0.0 when exactly one is.
* log-mel cosine: Hann window 1024, hop 256, power spectrum, 64 triangular mel bands (HTK
  scale, 0 Hz .. Nyquist), in dB, floored at 80 dB below the louder of the two, shifted so the
  floor is 0; cosine over all channels, bands and frames. It survives the phase drift that
  sinks the waveform metrics once two generations diverge.
"""

from __future__ import annotations

import math

import numpy as np

from harness.collect import audio_align

N_FFT = 1024
HOP = 256
N_MELS = 64
DB_RANGE = 80.0


CHUNK = 1 << 18  # samples per float64 block: sums stay exact-ish without doubling memory


def _sums(a: np.ndarray, b: np.ndarray | None = None) -> tuple[float, float, float, float]:
    """sum a^2, sum b^2, sum a*b, sum (a-b)^2 in float64, block by block."""
    x = np.asarray(a).reshape(-1)
    y = np.asarray(b).reshape(-1) if b is not None else x
    aa = bb = ab = ee = 0.0
    for i in range(0, x.size, CHUNK):
        u = x[i : i + CHUNK].astype(np.float64)
        v = y[i : i + CHUNK].astype(np.float64)
        e = u - v
        aa += float(np.dot(u, u))
        bb += float(np.dot(v, v))
        ab += float(np.dot(u, v))
        ee += float(np.dot(e, e))
    return aa, bb, ab, ee


def snr_db(ref: np.ndarray, test: np.ndarray) -> float:
    signal, _, _, noise = _sums(ref, test)
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    aa, bb, ab, _ = _sums(a, b)
    if aa == 0.0 and bb == 0.0:
        return 1.0
    if aa == 0.0 or bb == 0.0:
        return 0.0
    return ab / (math.sqrt(aa) * math.sqrt(bb))


def rms(x: np.ndarray) -> float:
    n = np.size(x)
    return math.sqrt(_sums(x)[0] / n) if n else 0.0


def peak(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) if np.size(x) else 0.0


def hz_to_mel(f: np.ndarray | float) -> np.ndarray | float:
    return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)


def mel_to_hz(m: np.ndarray | float) -> np.ndarray | float:
    return 700.0 * (10.0 ** (np.asarray(m) / 2595.0) - 1.0)


def mel_filterbank(sample_rate: int, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """Triangular filters [n_mels, n_fft // 2 + 1], peak 1, edges evenly spaced in HTK mel."""
    freqs = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(0.0, hz_to_mel(sample_rate / 2.0), n_mels + 2))
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None, :] - lo) / (mid - lo)
    down = (hi - freqs[None, :]) / (hi - mid)
    return np.maximum(0.0, np.minimum(up, down))


def mel_power(x: np.ndarray, sample_rate: int, *, block: int = 512) -> np.ndarray:
    """Mel power spectrogram [channels, n_mels, frames] of float [channels, samples] audio.

    STFT frames are computed ``block`` at a time, so memory does not grow with the length.
    """
    x = np.asarray(x, np.float32)
    if x.ndim == 1:
        x = x[None]
    if x.shape[1] < N_FFT:
        x = np.pad(x, ((0, 0), (0, N_FFT - x.shape[1])))
    n_frames = 1 + (x.shape[1] - N_FFT) // HOP
    window = (np.hanning(N_FFT + 1)[:-1]).astype(np.float32)  # periodic Hann
    fb = mel_filterbank(sample_rate).astype(np.float32)
    out = np.empty((x.shape[0], fb.shape[0], n_frames), np.float64)
    for f0 in range(0, n_frames, block):
        f1 = min(f0 + block, n_frames)
        idx = np.arange(N_FFT)[None, :] + HOP * np.arange(f0, f1)[:, None]
        # float32 FFT and a BLAS product: ample for a similarity reading, ~10x faster
        spec = np.abs(np.fft.rfft(x[:, idx] * window, axis=-1)) ** 2  # [C, f, bins]
        out[:, :, f0:f1] = np.matmul(fb, spec.transpose(0, 2, 1))
    return out


def logmel_cosine(a: np.ndarray, b: np.ndarray, sample_rate: int) -> float:
    pa, pb = mel_power(a, sample_rate), mel_power(b, sample_rate)
    top = max(float(pa.max()), float(pb.max()))
    if top <= 0.0:
        return 1.0  # both silent
    floor = 10.0 * math.log10(top) - DB_RANGE

    def db(p: np.ndarray) -> np.ndarray:
        return np.maximum(10.0 * np.log10(np.maximum(p, 1e-30)), floor) - floor

    return cosine(db(pa), db(pb))


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


def pair_metrics(a: np.ndarray, b: np.ndarray, sample_rate: int) -> dict:
    """SNR/cosine/log-mel metrics of two equal-rate tracks, truncated to the shorter one."""
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"channel counts differ: {a.shape[0]} and {b.shape[0]}")
    ta, tb, lag = audio_align.aligned(a, b)  # bounded lag search, then the common span
    n = ta.shape[1]
    return {
        "lag_samples": lag,
        "sample_rate": sample_rate,
        "channels": int(a.shape[0]),
        "samples_a": int(a.shape[1]),
        "samples_b": int(b.shape[1]),
        "samples_compared": int(n),
        "samples_dropped": int(abs(a.shape[1] - b.shape[1])),
        "snr_db": snr_db(ta, tb),
        "snr_db_per_channel": [snr_db(ta[c], tb[c]) for c in range(a.shape[0])],
        "cosine": cosine(ta, tb),
        "logmel_cosine": logmel_cosine(ta, tb, sample_rate),
        "rms_a": rms(a),
        "rms_b": rms(b),
        "peak_a": peak(a),
        "peak_b": peak(b),
        "bitwise_equal": bool(a.shape == b.shape and np.array_equal(a, b)),
    }
