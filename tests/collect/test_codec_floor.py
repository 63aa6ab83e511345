"""harness.collect.codec_floor: the codec's own error, the codec settings and the decode convention."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.collect.codec_floor import (
    CodecSettings,
    decode_convention,
    encoder_settings,
    measure_codec_floor,
    x264_info,
)
from harness.media import iter_frames, write_av


def _scene(n: int = 8, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:64, 0:96].astype(np.float32)
    out = []
    for t in range(n):
        rgb = np.stack([128 + 90 * np.sin(xx / 8 + t), 128 + 70 * np.cos(yy / 6 - t), 2.0 * xx], -1)
        out.append(np.clip(rgb + rng.normal(0, 4, rgb.shape), 0, 255).astype(np.uint8))
    return out


@pytest.fixture
def encoded(tmp_path: Path) -> tuple[Path, Path, list[np.ndarray]]:
    frames = _scene()
    audio = (0.3 * np.sin(np.arange(10667) / 15.0))[None].repeat(2, 0).astype(np.float32)
    write_av(tmp_path / "o.mp4", frames, audio, fps=24, crf=23, lossless_copy=tmp_path / "o.mkv")
    return tmp_path / "o.mp4", tmp_path / "o.mkv", frames


def test_settings_come_from_the_spec_else_the_files_x264_info(encoded):
    mp4, _, _ = encoded
    assert "crf=23.0" in x264_info(mp4)
    found = encoder_settings(mp4)
    assert (found.codec, found.pix_fmt, found.crf) == ("h264", "yuv420p", 23)
    assert "x264 info" in found.source
    given = encoder_settings(mp4, crf=18, preset="medium")
    assert (given.crf, given.preset, given.source) == (18, "medium", "run spec")


def test_decode_convention_names_matrix_and_range(encoded):
    mp4, mkv, _ = encoded
    text = decode_convention(mp4)
    assert "BT.601 (untagged" in text and "range limited 16-235" in text and "h264 yuv420p" in text
    assert decode_convention(mkv).startswith("ffv1 bgr0: RGB stored")


def test_codec_floor_lossless_is_the_encode_error_and_reencode_estimates_it(encoded):
    mp4, mkv, frames = encoded
    exact, method = measure_codec_floor(mp4, encoder_settings(mp4), lossless=mkv)
    assert method == "lossless"
    decoded = list(iter_frames(mp4))
    mse = np.mean([np.mean((a.astype(np.float64) - b) ** 2) for a, b in zip(frames, decoded, strict=True)])
    assert exact.video.psnr_pooled == pytest.approx(10 * np.log10(255**2 / mse), abs=1e-6)
    again, method = measure_codec_floor(mp4, CodecSettings(crf=23))
    assert method == "re-encode" and again.video.frames == len(frames)
    assert again.video.psnr_pooled > exact.video.psnr_pooled  # the second encode loses less
    assert sorted(p.name for p in mp4.parent.iterdir()) == ["o.mkv", "o.mp4"]  # the re-encode is gone


def test_a_reencode_is_measured_against_its_lossless_twin_not_the_colour_conversion(encoded, tmp_path):
    """Frames through RGB -> YUV 4:2:0 -> RGB move even at CRF 0: that bias is not the codec's."""
    from harness.collect.codec_floor import reencode
    from harness.collect.suite import measure_pair

    mp4, _, _ = encoded
    settings = CodecSettings(crf=23)
    floor, _ = measure_codec_floor(mp4, settings)
    reencode(mp4, tmp_path / "lossy.mp4", settings)
    reencode(mp4, tmp_path / "twin.mp4", settings, crf=0)
    against_ref = measure_pair(mp4, tmp_path / "lossy.mp4")
    bias = measure_pair(mp4, tmp_path / "twin.mp4")
    assert bias.video.psnr_pooled < 80  # the conversion alone moves pixels
    assert floor.video.psnr_pooled == pytest.approx(
        measure_pair(tmp_path / "twin.mp4", tmp_path / "lossy.mp4").video.psnr_pooled
    )
    assert floor.video.psnr_pooled > against_ref.video.psnr_pooled  # the bias is left out
    assert floor.audio.snr_db == pytest.approx(against_ref.audio.snr_db)  # audio against the reference
