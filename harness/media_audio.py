"""Audio handed to the mp4 writer: checked (float32 [channels, samples], 1 or 2 channels, finite,
clipped to [-1, 1]) and fed to the encoder a chunk at a time from one array or a stream of blocks."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from harness.errors import HarnessError


def check_audio(audio: np.ndarray, path: Path) -> np.ndarray:
    a = np.asarray(audio, dtype=np.float32)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] not in (1, 2):
        raise HarnessError(
            f"{path}: audio must be float32 [channels, samples] with 1 or 2 channels, got {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise HarnessError(f"{path}: audio contains NaN or Inf")
    return np.ascontiguousarray(np.clip(a, -1.0, 1.0))


class AudioFeed:
    """Checked audio taken a few samples at a time from ``blocks`` (arrays [C, S], in order)."""

    def __init__(self, blocks: Iterable[np.ndarray], path: Path):
        self.path = path
        self._blocks = iter(blocks)
        self._block: np.ndarray | None = None
        self._pos = 0
        self._fill()
        self.channels = self._block.shape[0] if self._block is not None else 0

    def _fill(self) -> None:
        """The next non-empty block, or None at the end."""
        for raw in self._blocks:
            block = check_audio(raw, self.path)
            if self._block is not None and block.shape[0] != self._block.shape[0]:
                raise HarnessError(f"{self.path}: audio blocks change channel count midway")
            if block.shape[1]:
                self._block, self._pos = block, 0
                return
        self._block = None

    def take(self, most: int) -> np.ndarray | None:
        """Up to ``most`` samples (fewer at the end of a block), None when the audio has ended."""
        if self._block is not None and self._pos >= self._block.shape[1]:
            self._fill()
        if self._block is None:
            return None
        part = self._block[:, self._pos : self._pos + most]
        self._pos += part.shape[1]
        return part


OPUS_RATE = 48000  # libopus takes 48, 24, 16, 12 or 8 kHz; a track at another rate is resampled
OPUS_BITRATE = 64000  # mono: near transparent (a clip is for listening; the metrics read the track)


def opus_clip(mono: np.ndarray, rate: int, bitrate: int = OPUS_BITRATE) -> bytes:
    """Opus in WebM (every browser plays it; a twentieth of PCM) of a mono track at ``rate`` Hz, written
    seekably in memory so the container states the duration."""
    import io

    import av

    pcm = np.ascontiguousarray(np.clip(np.asarray(mono, dtype=np.float32), -1.0, 1.0)[None, :])
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="webm") as c:
        stream = c.add_stream("libopus", rate=OPUS_RATE, layout="mono")
        stream.bit_rate = int(bitrate)
        # The encoder takes its own rate and sample format: FFmpeg's resampler converts.
        resampler = av.AudioResampler(format=stream.codec_context.format, layout="mono", rate=OPUS_RATE)
        frame = av.AudioFrame.from_ndarray(pcm, format="flt", layout="mono")
        frame.sample_rate = int(rate)
        frame.pts = 0
        for part in (*resampler.resample(frame), *resampler.resample(None)):
            c.mux(stream.encode(part))
        c.mux(stream.encode(None))
    return buf.getvalue()
