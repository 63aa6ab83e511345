from __future__ import annotations

import math

import numpy as np
import pytest
from collect_testutil import best_lag, cosine, logmel_cosine, peak, rms, snr_db, spectral_error

from harness.collect import audio
from harness.collect.audio import mel_filterbank, mel_power, pair_metrics, resample

RATE = 32000


def _signal(n: int = RATE, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / RATE
    x = np.stack([0.3 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 700 * t)])
    return (x + rng.normal(0, 0.05, x.shape)).astype(np.float32)


def test_snr_cosine_rms_peak_match_formulas() -> None:
    a = _signal()
    b = (a + np.random.default_rng(1).normal(0, 0.01, a.shape)).astype(np.float32)
    x, y = a.astype(np.float64), b.astype(np.float64)
    assert snr_db(a, b) == pytest.approx(10 * np.log10((x**2).sum() / ((x - y) ** 2).sum()), rel=1e-12)
    assert cosine(a, b) == pytest.approx((x * y).sum() / np.sqrt((x**2).sum() * (y**2).sum()), rel=1e-12)
    assert rms(a) == pytest.approx(np.sqrt((x**2).mean()), rel=1e-12)
    assert peak(b) == float(np.abs(b).max())


def test_snr_is_asymmetric_with_a_as_reference() -> None:
    a = _signal()
    b = (a * 0.5).astype(np.float32)
    assert snr_db(a, b) == pytest.approx(10 * np.log10(4.0), abs=1e-6)  # noise = a/2
    assert snr_db(b, a) == pytest.approx(0.0, abs=1e-6)  # noise = b


def test_blocked_sums_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _signal(), _signal(seed=2)
    whole = (snr_db(a, b), cosine(a, b), rms(a))
    monkeypatch.setattr(audio, "CHUNK", 1000)  # many blocks, a ragged last one
    assert (snr_db(a, b), cosine(a, b), rms(a)) == pytest.approx(whole, rel=1e-12)


def test_silence_and_identity() -> None:
    z = np.zeros((2, 1000), np.float32)
    a = _signal(1000)
    assert snr_db(a, a.copy()) == math.inf and cosine(a, a.copy()) == pytest.approx(1.0)
    assert snr_db(z, z) == math.inf and cosine(z, z) == 1.0 and logmel_cosine(z, z, RATE) == 1.0
    assert snr_db(z, a) == -math.inf and cosine(z, a) == 0.0
    assert snr_db(a, z) == 0.0  # the test is silent: noise equals the signal
    assert rms(z) == 0.0 and peak(z) == 0.0


def test_mel_filterbank_shape() -> None:
    fb = mel_filterbank(RATE, 1024, 64)
    assert fb.shape == (64, 513)
    assert fb.min() == 0.0 and fb.max() <= 1.0
    assert (fb.max(axis=1) > 0.5).all()  # every band has a peak near 1
    centers = fb.argmax(axis=1)
    assert (np.diff(centers) >= 0).all()  # ordered by frequency
    assert np.diff(centers)[-5:].mean() > np.diff(centers)[:5].mean()  # mel: wider at the top


def test_mel_power_locates_a_tone_and_is_blockwise_exact() -> None:
    t = np.arange(RATE) / RATE
    tone = np.sin(2 * np.pi * 1000 * t).astype(np.float32)[None]
    p = mel_power(tone, RATE)
    fb = mel_filterbank(RATE)
    freqs = np.linspace(0, RATE / 2, 513)
    assert p.shape[0] == 1 and p.shape[1] == 64 and p.shape[2] == 1 + (RATE - 1024) // 256
    band = int(p[0].mean(axis=1).argmax())
    assert fb[band, np.argmin(np.abs(freqs - 1000))] > 0.3  # the loudest band covers 1 kHz
    assert np.allclose(mel_power(tone, RATE, block=7), p, rtol=1e-12)


def test_logmel_cosine_behaviour() -> None:
    a = _signal(2 * RATE)
    near = (a + np.random.default_rng(3).normal(0, 0.002, a.shape)).astype(np.float32)
    other = _signal(2 * RATE, seed=9)[::-1].copy() * 0.1
    shifted = np.roll(a, 37, axis=1)  # phase drift: waveform metrics collapse, spectra do not
    assert logmel_cosine(a, a.copy(), RATE) == pytest.approx(1.0)
    assert logmel_cosine(a, near, RATE) > 0.99
    assert logmel_cosine(a, shifted, RATE) > 0.98 > cosine(a, shifted)
    assert logmel_cosine(a, other, RATE) < logmel_cosine(a, near, RATE)


def test_resample_keeps_a_tone() -> None:
    t = np.arange(RATE) / RATE
    x = np.stack([np.sin(2 * np.pi * 500 * t)] * 2).astype(np.float32) * 0.5
    y = resample(x, RATE, 16000)
    assert y.shape[0] == 2 and abs(y.shape[1] - 16000) <= 64
    ref = 0.5 * np.sin(2 * np.pi * 500 * np.arange(y.shape[1]) / 16000)
    mid = slice(200, y.shape[1] - 200)
    lag = max(range(-40, 41), key=lambda k: float(np.dot(np.roll(y[0], k)[mid], ref[mid])))
    assert np.abs(np.roll(y[0], lag)[mid] - ref[mid]).max() < 0.02  # a clean tone, maybe delayed
    assert resample(x, RATE, RATE) is not None and resample(x, RATE, RATE).shape == x.shape


def test_pair_metrics_truncates_and_records() -> None:
    a = _signal(5000)
    b = a[:, :4000].copy()
    m = pair_metrics(a, b, RATE)
    assert m["samples_compared"] == 4000 and m["samples_dropped"] == 1000
    assert m["samples_a"] == 5000 and m["samples_b"] == 4000
    assert m["snr_db"] == math.inf and m["cosine"] == pytest.approx(1.0)
    assert m["rms_a"] == pytest.approx(rms(a)) and m["rms_b"] == pytest.approx(rms(b))
    assert not m["bitwise_equal"]  # different lengths
    assert pair_metrics(a, a.copy(), RATE)["bitwise_equal"]
    assert len(m["snr_db_per_channel"]) == 2
    with pytest.raises(ValueError, match="channel"):
        pair_metrics(a, a[:1], RATE)


@pytest.mark.parametrize(
    ("len_a", "len_b", "channels"),
    [(RATE, RATE, 2), (RATE, RATE - 777, 2), (20000, 23000, 1), (900, 5000, 2), (700, 600, 1)],
)
def test_streamed_pair_equals_whole_tracks(len_a: int, len_b: int, channels: int) -> None:
    """Blocks of any size, pushed in any interleaving, give what the whole arrays give."""
    a = _signal(len_a)[:channels]
    b = (_signal(len_b, seed=4)[:channels] * 0.3 + _signal(len_b)[:channels] * 0.7).astype(np.float32)
    want = pair_metrics(a, b, RATE)
    rng = np.random.default_rng(len_a + len_b)
    stream = audio.PairStream(RATE)
    pos = [0, 0]
    tracks = (a, b)
    while pos[0] < len_a or pos[1] < len_b:
        k = int(rng.integers(0, 2)) if pos[0] < len_a and pos[1] < len_b else int(pos[0] >= len_a)
        step = int(rng.integers(1, 9000))
        stream.push(k, tracks[k][:, pos[k] : pos[k] + step])
        pos[k] += step
    got = stream.result()
    assert set(got) == set(want) - {
        "residual_lag_samples",
        "residual_corr",
        "aligned_corr",
    }  # suite adds them
    for key, value in got.items():
        assert value == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
    # And against the definitions written out in float64 numpy (pair_metrics is the stream's result).
    n = min(len_a, len_b)
    x, y = a[:, :n].astype(np.float64), b[:, :n].astype(np.float64)
    assert got["snr_db"] == pytest.approx(10 * math.log10(np.sum(x**2) / np.sum((x - y) ** 2)), rel=1e-9)
    assert got["cosine"] == pytest.approx(np.sum(x * y) / math.sqrt(np.sum(x**2) * np.sum(y**2)), rel=1e-9)
    for side, track in (("a", a), ("b", b)):
        assert got[f"rms_{side}"] == pytest.approx(
            math.sqrt(np.mean(track.astype(np.float64) ** 2)), rel=1e-9
        )
        assert got[f"peak_{side}"] == float(np.max(np.abs(track)))
    same = audio.PairStream(RATE)
    same.push(0, a)
    same.push(1, a.copy())
    assert same.result()["bitwise_equal"] and same.result()["snr_db"] == math.inf


@pytest.mark.parametrize("shift", [37, -211])
def test_streamed_pair_with_a_lag_equals_the_aligned_whole_tracks(shift: int) -> None:
    """The containers place B |shift| samples late (or early): the stream leaves the late head out of the
    pairing, as pair_metrics does on whole tracks; whole-track RMS and peak still see every sample."""
    base = _signal(RATE + 500)
    a = base[:, 250 : 250 + RATE]
    b = (base[:, 250 - shift : 250 - shift + RATE] + 0.01 * _signal(RATE, seed=9)).astype(np.float32)
    lag = best_lag(a, b)
    assert lag == shift
    want = pair_metrics(a, b, RATE, lag)
    assert want["residual_lag_samples"] == 0  # nothing left once aligned
    stream = audio.PairStream(RATE, lag)
    for start in range(0, RATE, 4096):
        stream.push(0, a[:, start : start + 4096])
        stream.push(1, b[:, start : start + 4096])
    got = stream.result()
    assert got["lag_samples"] == want["lag_samples"] == shift
    assert got["samples_compared"] == want["samples_compared"] == RATE - abs(shift)
    for key in ("snr_db", "cosine", "logmel_cosine", "spectral_error", "rms_a", "rms_b", "peak_a", "peak_b"):
        assert got[key] == pytest.approx(want[key], rel=1e-9), key
    assert got["snr_db"] > 30 and not got["bitwise_equal"]


def _music(seed: int, seconds: float = 4.0) -> np.ndarray:
    """A few tones with slow envelopes and a little noise: music-like, with quiet passages."""
    g = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    x = sum(
        g.uniform(0.05, 0.2)
        * np.sin(2 * np.pi * g.uniform(100, 2000) * t + g.uniform(0, 6))
        * (1 + np.sin(2 * np.pi * g.uniform(0.5, 3) * t))
        for _ in range(6)
    )
    x = (x + 0.02 * g.normal(size=t.size)) * np.clip(np.sin(2 * np.pi * 0.5 * t), 0.05, 1)
    return x[None].astype(np.float32)


def _at_snr(a: np.ndarray, snr: float, seed: int = 0) -> np.ndarray:
    n = np.random.default_rng(seed).normal(size=a.shape)
    n *= np.sqrt((a.astype(np.float64) ** 2).sum() / (n**2).sum() / 10 ** (snr / 10))
    return (a + n).astype(np.float32)


def test_spectral_error_is_calibrated_close_reads_close_unrelated_far():
    """The log-mel cosine's 80 dB floor swamps it: a pair at 19 dB SNR and waveform cosine 0.994 reads
    about as far as unrelated audio. The mel spectral error reads close for close audio (about
    10^(-SNR/10)), far for unrelated audio, and grows as the SNR falls."""
    a, other = _music(1), _music(2)
    close = _at_snr(a, 19.0)
    assert cosine(a, close) > 0.99
    errs = [spectral_error(a, _at_snr(a, snr), RATE) for snr in (40, 30, 19, 10, 0)]
    assert errs == sorted(errs) and errs[0] < 1e-3
    assert 0.2 * 10**-1.9 < spectral_error(a, close, RATE) < 5 * 10**-1.9
    assert spectral_error(a, other, RATE) > 0.5 > 50 * spectral_error(a, close, RATE)
    assert spectral_error(a, a.copy(), RATE) == 0.0
    assert spectral_error(a, np.zeros_like(a), RATE) == pytest.approx(1.0)
    # the log-mel cosine cannot tell the two apart by much: what made it unfit to judge
    gap = logmel_cosine(a, close, RATE) - logmel_cosine(a, other, RATE)
    assert gap < 0.1 and 1 - spectral_error(a, close, RATE) - (1 - spectral_error(a, other, RATE)) > 1.0


def _mel_fp64(x: np.ndarray, rate: int) -> np.ndarray:
    """The mel power spectrogram written out independently in float64: periodic Hann 1024, hop 256, full
    frames, |rfft|^2, HTK triangles from 0 Hz to Nyquist with peak 1."""
    n_fft, hop, n_mels = 1024, 256, 64
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    frames = np.array([x[i : i + n_fft] for i in range(0, x.size - n_fft + 1, hop)], np.float64)
    power = np.abs(np.fft.rfft(frames * win, axis=1)) ** 2
    mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    edges = 700 * (10 ** (np.linspace(0, mel(rate / 2), n_mels + 2) / 2595) - 1)
    freqs = np.arange(n_fft // 2 + 1) * rate / n_fft
    fb = np.zeros((n_mels, freqs.size))
    for m in range(n_mels):
        lo, c, hi = edges[m : m + 3]
        fb[m] = np.clip(np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)), 0, None)
    return fb @ power.T


def test_mel_power_equals_an_fp64_implementation_and_librosa():
    a = _music(3, seconds=1.0)
    got = mel_power(a, RATE)[0]
    want = _mel_fp64(a[0].astype(np.float64), RATE)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4 * want.max()
    b = _at_snr(a, 15.0)
    fp64 = float(
        ((np.sqrt(want) - np.sqrt(_mel_fp64(b[0].astype(np.float64), RATE))) ** 2).sum() / want.sum()
    )
    assert spectral_error(a, b, RATE) == pytest.approx(fp64, rel=1e-3)
    librosa = pytest.importorskip("librosa")
    ref = librosa.feature.melspectrogram(y=a[0], sr=RATE, n_fft=1024, hop_length=256, window="hann", center=False,
                                         power=2.0, n_mels=64, fmin=0.0, fmax=RATE / 2, htk=True, norm=None)  # fmt: skip
    assert ref.shape == got.shape
    assert np.abs(got - ref).max() <= 1e-4 * ref.max()
