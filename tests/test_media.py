from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from harness.errors import HarnessError
from harness.media import MediaWriter, iter_frames, probe, read_audio, write_av


def _frames(n: int = 8, h: int = 64, w: int = 96, seed: int = 0) -> np.ndarray:
    # Smooth gradients plus a moving square: compresses well, so decode is close to the input.
    yy, xx = np.mgrid[0:h, 0:w]
    out = np.empty((n, h, w, 3), np.uint8)
    for t in range(n):
        out[t, ..., 0] = (xx * 255 // max(w - 1, 1)).astype(np.uint8)
        out[t, ..., 1] = (yy * 255 // max(h - 1, 1)).astype(np.uint8)
        out[t, ..., 2] = 60
        out[t, 10:30, 5 + 4 * t : 25 + 4 * t, :] = 220
    return out


def _tone(seconds: float, rate: int = 32000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return np.stack([0.3 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 660 * t)]).astype(np.float32)


def test_write_probe_read_round_trip(tmp_path: Path) -> None:
    frames = _frames()
    audio = _tone(8 / 24)
    out = tmp_path / "sub" / "out.mp4"
    write_av(out, iter(list(frames)), audio, fps=24, sample_rate=32000)
    assert [p.name for p in out.parent.iterdir()] == ["out.mp4"]  # no temp file left behind

    info = probe(out)
    assert (info.frames, info.width, info.height) == (8, 96, 64)
    assert info.fps == pytest.approx(24.0)
    assert info.has_audio and info.audio_rate == 32000 and info.audio_channels == 2
    assert info.size_bytes == out.stat().st_size
    assert info.duration_s == pytest.approx(8 / 24, abs=0.05)

    decoded = list(iter_frames(out))
    assert len(decoded) == 8
    assert all(f.dtype == np.uint8 and f.shape == (64, 96, 3) for f in decoded)
    assert np.abs(np.stack(decoded).astype(int) - frames).mean() < 3.0
    assert list(iter_frames(out, threads=False))[3].tobytes() == decoded[3].tobytes()

    pcm, rate = read_audio(out)
    assert rate == 32000 and pcm.dtype == np.float32 and pcm.shape[0] == 2
    n = min(pcm.shape[1], audio.shape[1])
    assert audio.shape[1] <= pcm.shape[1] < audio.shape[1] + 2048  # AAC pads to whole frames
    snr = 10 * np.log10((audio[:, :n] ** 2).sum() / ((audio[:, :n] - pcm[:, :n]) ** 2).sum())
    assert snr > 15.0  # AAC costs ~20-26 dB; a misaligned or wrong-channel track would be < 0


def test_array_input_and_no_audio(tmp_path: Path) -> None:
    out = tmp_path / "v.mp4"
    write_av(out, _frames(3), crf=0, preset="ultrafast")
    info = probe(out)
    assert info.frames == 3 and not info.has_audio and info.audio_rate is None
    with pytest.raises(HarnessError, match=r"v\.mp4.*no audio track"):
        read_audio(out)


def test_odd_size_rejected_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "odd.mp4"
    with pytest.raises(HarnessError, match=r"odd\.mp4.*even"):
        write_av(out, np.zeros((2, 63, 96, 3), np.uint8))
    assert list(tmp_path.iterdir()) == []


def test_bad_frames_rejected(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="uint8"):
        write_av(tmp_path / "f.mp4", [np.zeros((64, 96, 3), np.float32)])
    with pytest.raises(HarnessError, match="earlier frames"):
        write_av(tmp_path / "g.mp4", [np.zeros((64, 96, 3), np.uint8), np.zeros((32, 96, 3), np.uint8)])
    with pytest.raises(HarnessError, match="no frames"):
        write_av(tmp_path / "h.mp4", [])
    assert list(tmp_path.iterdir()) == []


def test_missing_empty_corrupt_truncated(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"nope\.mp4: file not found"):
        probe(tmp_path / "nope.mp4")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(HarnessError, match=r"empty\.mp4: file is empty"):
        list(iter_frames(empty))
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00not a video at all" * 100)
    with pytest.raises(HarnessError, match=r"junk\.mp4"):
        probe(junk)

    good = tmp_path / "good.mp4"
    write_av(good, _frames(8), _tone(0.3))
    data = good.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])  # moov is at the end: the index is gone
    for fn in (probe, lambda p: list(iter_frames(p)), read_audio):
        with pytest.raises(HarnessError, match=r"cut\.mp4") as err:
            fn(cut)
        assert "\n" not in str(err.value)


def test_wav_and_flac(tmp_path: Path) -> None:
    audio = _tone(0.1, 16000)
    for name in ("a.wav", "a.flac"):
        sf.write(tmp_path / name, audio.T, 16000, subtype="PCM_16")
        pcm, rate = read_audio(tmp_path / name)
        assert rate == 16000 and pcm.shape == audio.shape and pcm.dtype == np.float32
        assert np.abs(pcm - audio).max() < 1e-4


def test_encoding_is_reproducible_at_a_slow_preset(tmp_path):
    """Two encodes of the same frames give the same bytes (the noise floor must not measure the encoder)."""
    import hashlib

    yy, xx = np.mgrid[0:128, 0:224]
    frames = []
    for t in range(40):  # a smooth moving pattern with some noise: what lookahead decisions act on
        noise = np.random.default_rng(t).integers(0, 24, (128, 224, 1))
        img = 128 + 90 * np.sin(xx[..., None] / (9 + t / 8) + yy[..., None] / 13 + np.arange(3) + t / 5)
        frames.append(np.clip(img + noise, 0, 255).astype(np.uint8))
    digests = set()
    for i in range(4):
        path = tmp_path / f"v{i}.mp4"
        write_av(path, frames, None, preset="medium")
        digests.add(hashlib.sha256(path.read_bytes()).hexdigest())
    assert len(digests) == 1


def test_lossless_twin_is_bit_exact_beside_the_mp4(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (5, 64, 96, 3), dtype=np.uint8)  # noise: what H.264 cannot keep
    audio = _tone(5 / 24)
    copy_s = write_av(
        tmp_path / "out.mp4", iter(list(frames)), audio, fps=24, lossless_copy=tmp_path / "out_lossless.mkv"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4", "out_lossless.mkv"]
    back = list(iter_frames(tmp_path / "out_lossless.mkv"))
    assert len(back) == 5 and all(np.array_equal(a, b) for a, b in zip(frames, back, strict=True))
    pcm, rate = read_audio(tmp_path / "out_lossless.mkv")
    assert rate == 32000 and np.array_equal(pcm, audio)
    assert not np.array_equal(list(iter_frames(tmp_path / "out.mp4"))[0], frames[0])
    assert copy_s > 0 and write_av(tmp_path / "plain.mp4", frames, audio) == 0.0

    def broken():
        yield from frames[:2]
        raise RuntimeError("decoder died")

    with pytest.raises(RuntimeError, match="decoder died"):  # neither file, nor half of one, is left
        write_av(tmp_path / "b.mp4", broken(), audio, lossless_copy=tmp_path / "b_lossless.mkv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4", "out_lossless.mkv", "plain.mp4"]
    empty = MediaWriter(tmp_path / "none.mkv", lossless=True, fps=24)
    with pytest.raises(HarnessError, match="no frames"):
        empty.close()
    assert not (tmp_path / "none.mkv").exists()
