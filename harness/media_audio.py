"""Audio handed to the mp4 writer: checked (float32 [channels, samples], 1 or 2 channels, finite,
clipped to [-1, 1]) and fed to the encoder a chunk at a time, from one array or from a stream of
blocks (``media.iter_audio``), so re-encoding a long track never holds it whole.
"""

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
