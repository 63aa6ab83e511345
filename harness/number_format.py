"""How numbers are written in every text the harness prints: n/a, inf, dB, seconds, ratios in words.

One place for these, so a terminal table, report.md, a verdict sentence and a gate violation
spell the same value the same way.
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


def speed_words(ratio: float | None) -> str:
    """B/A time ratio in words: 0.82 -> '1.22x faster'."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return NA
    if abs(ratio - 1.0) < 5e-4:
        return "same speed"
    return f"{1 / ratio:.2f}x faster" if ratio < 1 else f"{ratio:.2f}x slower"


def one_liner(what: str, a: float | None, b: float | None, unit: str = "s") -> str | None:
    """pyperf style: 's/step: 1.234 s -> 1.010 s: 1.22x faster'."""
    if a is None or b is None:
        return None
    ratio = b / a if a > 0 else None
    return f"{what}: {fmt_s(a)} {unit} -> {fmt_s(b)} {unit}: {speed_words(ratio)}"


def fmt_stat(name: str, x: float | None) -> str:
    """Frame counts as integers, everything else with four decimals."""
    if x is not None and name.endswith("_frames") and float(x).is_integer():
        return str(int(x))
    return fmt_num(x, 4)
