"""How numbers are written in every text the harness prints: n/a, inf, dB, seconds, ratios.

One place for these, so a terminal table, report.md, a verdict sentence and a gate violation
spell the same value the same way. Ratio words ("1.19x slower") come only with their
significance, from ``harness.compare.significance``.
"""

from __future__ import annotations

import math

NA = "n/a"


def fmt_num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return NA
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}f}"


def fmt_s(x: float | None) -> str:
    """Seconds: three decimals below 100 s, one above."""
    if x is None:
        return NA
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.3f}"


def fmt_db(x: float | None) -> str:
    if x is None:
        return NA
    if math.isinf(x) and x > 0:
        return "inf (identical)"
    return f"{fmt_num(x, 2)} dB"


def fmt_ratio(x: float | None) -> str:
    return NA if x is None or not math.isfinite(x) else f"{x:.3f}x"


def fmt_stat(name: str, x: float | None) -> str:
    """Frame counts as integers, everything else with four decimals."""
    if x is not None and name.endswith("_frames") and float(x).is_integer():
        return str(int(x))
    return fmt_num(x, 4)
