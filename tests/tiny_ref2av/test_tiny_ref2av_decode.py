from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.tiny_ref2av.config import PRESETS
from harness.tiny_ref2av.model import AUDIO_CH
from harness.tiny_ref2av.run import (
    PITCH_UNIT,
    VideoDecoder,
    decode_audio,
    downsample,
    fit_reference,
    load_reference,
    video_target,
)

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def setup():
    cfg = PRESETS["tiny"]
    ref = fit_reference(load_reference(cfg.reference), cfg.height, cfg.width)
    low = downsample(ref, cfg.latent_h, cfg.latent_w)
    return cfg, ref, low


def test_still_latents_decode_to_the_reference(setup):
    cfg, ref, low = setup
    lat = video_target(low, cfg.latent_t, "p")
    lat[..., 3:] = 0  # no flow, brightness or saturation change
    frames = list(VideoDecoder(cfg, ref, low, CPU).frames(lat))
    assert len(frames) == cfg.frames
    assert frames[0].dtype == np.uint8 and frames[0].shape == (cfg.height, cfg.width, 3)
    expect = np.round(ref.permute(1, 2, 0).numpy() * 255)
    # Frame 0 has no camera motion: the decoder reproduces the reference to rounding.
    assert np.abs(frames[0].astype(int) - expect).max() <= 1
    # Later frames zoom in: still the picture, but not the same pixels.
    diff = np.abs(frames[-1].astype(int) - expect).mean()
    assert 1.0 < diff < 40.0


def test_frames_stream_in_chunks_without_changing_pixels(setup):
    cfg, ref, low = setup
    lat = video_target(low, cfg.latent_t, "p") + 0.1 * torch.randn(
        cfg.latent_t, cfg.latent_h, cfg.latent_w, 8, generator=torch.Generator().manual_seed(3)
    )
    dec = VideoDecoder(cfg, ref, low, CPU)
    a = np.stack(list(dec.frames(lat, chunk=1)))
    b = np.stack(list(dec.frames(lat, chunk=7)))
    assert np.array_equal(a, b)
    assert dec.seconds > 0


def _dominant_hz(x: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / rate)[np.argmax(spec)])


@pytest.mark.parametrize("semitones", [0.0, 7.0, -5.0])
def test_audio_pitch_follows_the_latent(semitones):
    cfg = PRESETS["tiny"]
    lat = torch.zeros(cfg.audio_tokens, AUDIO_CH)
    lat[:, 0] = 3.0  # fundamental loud
    lat[:, 1:4] = -6.0  # upper partials quiet
    lat[:, 4] = semitones / PITCH_UNIT
    audio = decode_audio(lat, cfg)
    assert audio.dtype == np.float32 and audio.shape == (2, cfg.audio_samples)
    expect = 220.0 * 2 ** (semitones / 12)
    got = _dominant_hz(audio[0].astype(np.float64), cfg.audio_rate)
    assert abs(got - expect) < 3.0
    np.testing.assert_allclose(audio[0], audio[1], atol=1e-6)  # pan 0 -> centred


def test_audio_pan_and_bounds():
    cfg = PRESETS["tiny"]
    lat = torch.zeros(cfg.audio_tokens, AUDIO_CH)
    lat[:, 0:4] = 5.0
    lat[:, 6] = 3.0  # hard right
    audio = decode_audio(lat, cfg)
    assert np.abs(audio).max() <= 1.0
    assert np.sqrt(np.mean(audio[1] ** 2)) > 5 * np.sqrt(np.mean(audio[0] ** 2))
