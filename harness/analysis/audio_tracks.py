"""The decoded audio the report's figures and clips read, within bounded memory (a 10-minute 48 kHz
track is 115 MB as float32): each run's mono mix held only while it is needed (the track the others
are set against, and the current one), and envelopes taken a block of bins at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.analysis.model import Envelope, ReportResults
from harness.compare.summary import RunSummary

ENVELOPE_BINS = 1500
ENVELOPE_BLOCK = 64  # bins per block of an envelope: a block's samples are a copy at most


class Tracks:
    """Mono mixes (float32, as decoded) by run key: the ``pinned`` one is kept, any other only
    until the next one is asked for."""

    def __init__(self) -> None:
        self.pinned: str | None = None
        self._held: dict[str, tuple[np.ndarray, int]] = {}

    def get(self, run: RunSummary) -> tuple[np.ndarray, int]:
        if run.key not in self._held:
            for old in [k for k in self._held if k != self.pinned]:
                del self._held[old]  # before decoding: the two never overlap in memory
            from harness.media import read_mono

            self._held[run.key] = read_mono(str(run.output))
        return self._held[run.key]

    def pin(self, run: Any) -> Any:
        """Keep ``run``'s track (a ``RunSummary``) from now on; returns the run."""
        self.pinned = run.key
        return run


def first_seed_tracks(res: ReportResults) -> list[RunSummary]:
    """The first seed's runs (first repeats) with an output, the reference's first."""
    runs = [
        r for r in res.primary_runs if r.seed == res.primary_seed and r.ok and r.output and r.output_sha256
    ]
    return sorted(runs, key=lambda r: r.arm != res.reference_arm)


def envelope(
    x: np.ndarray, rate: int, bins: int = ENVELOPE_BINS, minus: np.ndarray | None = None
) -> Envelope:
    """Min/max per bin of ``x`` (minus ``minus`` over the shorter length, in float64), so long
    tracks plot quickly and still show peaks; one block of bins in memory at a time."""
    n = min(x.size, minus.size) if minus is not None else x.size
    bins = max(1, min(bins, n))
    edges = np.linspace(0, n, bins + 1).astype(int)
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    for i in range(0, bins if n else 0, ENVELOPE_BLOCK):
        j = min(i + ENVELOPE_BLOCK, bins)
        start, stop = int(edges[i]), int(edges[j])
        block = x[start:stop] if minus is None else x[start:stop].astype(np.float64) - minus[start:stop]
        local = edges[i:j] - start
        lo.append(np.minimum.reduceat(block, local))
        hi.append(np.maximum.reduceat(block, local))
    low = np.concatenate(lo) if lo else np.zeros(0)
    high = np.concatenate(hi) if hi else np.zeros(0)
    return Envelope(
        t=[round(float(i) / rate, 6) for i in edges[: low.size]],
        lo=[round(float(v), 5) for v in low],
        hi=[round(float(v), 5) for v in high],
    )
