"""How numbers are written in every text the harness prints: n/a, inf, dB, seconds, ratios.

One place for these, so a terminal table, report.md, pr.md, a verdict sentence and a gate
violation spell the same value the same way. Ratio words ("1.19x slower") come only with their
significance, from ``harness.compare.significance``.
"""

from __future__ import annotations

import math

NA = "n/a"
IDENTICAL = "inf (identical)"  # a PSNR of identical frames or samples


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


def fmt_db(x: float | None, identical: str = IDENTICAL) -> str:
    """dB with two decimals; +inf (identical) as ``identical`` (pr.md writes 'identical')."""
    if x is None:
        return NA
    if math.isinf(x) and x > 0:
        return identical
    return f"{fmt_num(x, 2)} dB"


def fmt_ratio(x: float | None) -> str:
    return NA if x is None or not math.isfinite(x) else f"{x:.3f}x"


def ratio_text(r: float | None) -> str:
    """An error-energy ratio: 1.27x, 34.3x, 3.6e+08x (two decimals near the tolerance, three figures beyond)."""
    if r is None:
        return NA
    if math.isinf(r):
        return "inf"
    return f"{r:.2f}x" if r < 10 else f"{r:.3g}x"


def fmt_speedup(x: float | None) -> str:
    """Reference time / run time: '1.33x' (above 1: faster)."""
    return NA if x is None else f"{x:.2f}x"


def fmt_stat(name: str, x: float | None) -> str:
    """Frame counts as integers, everything else with four decimals."""
    if x is not None and name.endswith("_frames") and float(x).is_integer():
        return str(int(x))
    return fmt_num(x, 4)


def shown(x: float, digits: int) -> float:
    """``x`` as it is printed with ``digits`` decimals: a shorter form rounds that figure, never the raw
    value, so two texts of one number never disagree in a last digit."""
    return float(f"{x:.{digits}f}")


def fmt_rounded(x: float | None, digits: int, printed: int) -> str:
    """``digits`` decimals of the figure printed elsewhere with ``printed`` decimals."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return NA
    return f"{shown(x, printed):.{digits}f}"


def fmt_time(x: float | None) -> str:
    """Seconds as the pull request wrote them: one decimal from 10 s up, else three (of the figure that
    ``fmt_s`` prints: three decimals below 100 s, one above)."""
    if x is None:
        return NA
    x = shown(x, 1 if abs(x) >= 100 else 3)
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.3f}"
