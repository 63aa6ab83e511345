"""How much media the harness decodes at most: a frame size and a duration far above any generated
video (4K is 8.3 Mpixel; runs last seconds to minutes) and low enough that a wrong or hostile file is
refused in one line (exit 2) instead of exhausting memory. Each can be raised by its environment variable.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from harness.errors import HarnessError

MAX_FRAME_PIXELS_ENV = "HARNESS_MAX_FRAME_PIXELS"
MAX_DURATION_ENV = "HARNESS_MAX_MEDIA_SECONDS"
MAX_FRAME_PIXELS = 4096 * 4096
MAX_DURATION_S = 30 * 60.0


def _limit(env: str, default: float) -> float:
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise HarnessError(f"{env}={raw!r}: expected a positive number")
    return value


def max_duration_s() -> float:
    return _limit(MAX_DURATION_ENV, MAX_DURATION_S)


def check_frame_size(p: Path, width: int, height: int) -> None:
    """One line when a frame of ``width`` x ``height`` is over the limit."""
    limit = int(_limit(MAX_FRAME_PIXELS_ENV, MAX_FRAME_PIXELS))
    if width * height > limit:
        raise HarnessError(
            f"{p}: frames are {width}x{height} ({width * height / 1e6:.1f} Mpixel), over the limit of "
            f"{limit / 1e6:.1f} Mpixel a frame (set {MAX_FRAME_PIXELS_ENV} to raise it)"
        )


def check_duration(p: Path, seconds: float, what: str = "media") -> None:
    """One line when ``seconds`` of ``what`` is over the limit."""
    limit = max_duration_s()
    if seconds > limit:
        raise HarnessError(
            f"{p}: {what} lasts {seconds:.0f} s or more, over the limit of {limit:g} s "
            f"(set {MAX_DURATION_ENV} to raise it)"
        )


def check_samples(p: Path, samples: int, rate: int) -> None:
    """``check_duration`` for ``samples`` of audio decoded so far at ``rate`` (counted, as a
    header can lie about the duration)."""
    if rate > 0 and samples > max_duration_s() * rate:
        check_duration(p, samples / rate, "audio")
