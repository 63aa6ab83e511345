"""Arithmetic on numbers read from the world that never raises: an exponential past the floats is
inf, a mean of huge values is taken scaled so its sum cannot overflow."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

MAX_LOG = 709.0  # math.exp overflows above this


def safe_exp(x: float) -> float:
    """exp that saturates: inf above MAX_LOG (0 far below, NaN stays NaN, as math.exp gives them)."""
    return math.inf if x > MAX_LOG else math.exp(x)


def scaled_mean_sd(xs: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample sd (None for one value) of finite non-negative values, scaled by the largest."""
    top = max(xs)
    if top == 0:
        return 0.0, (0.0 if len(xs) > 1 else None)
    scaled = [x / top for x in xs]
    return statistics.fmean(scaled) * top, (statistics.stdev(scaled) * top if len(xs) > 1 else None)
