"""How numbers are written in every text the harness prints (n/a, inf, dB, seconds, ratios), so a
terminal table, report.md, pr.md, a verdict sentence and a gate violation spell a value alike."""

from __future__ import annotations

import math

NA = "n/a"
IDENTICAL = "inf (identical)"  # a PSNR of identical frames or samples


def fmt_num(x: float | None, digits: int = 3) -> str:
    """``digits`` decimals; nan and +-inf as such (format writes them so)."""
    return NA if x is None else f"{x:.{digits}f}"


def fmt_s(x: float | None) -> str:
    """Seconds: three decimals below 100 s, one above."""
    return NA if x is None else f"{x:.1f}" if abs(x) >= 100 else f"{x:.3f}"


def fmt_db(x: float | None, identical: str = IDENTICAL) -> str:
    """dB with two decimals; +inf (identical) as ``identical`` (pr.md writes 'identical')."""
    if x is None or (math.isinf(x) and x > 0):
        return NA if x is None else identical
    return f"{fmt_num(x, 2)} dB"


def fmt_ratio(x: float | None) -> str:
    return NA if x is None or not math.isfinite(x) else f"{x:.3f}x"


SMALLEST = 1e-3  # below this a ratio reads "under 0.001x": its digits say nothing a reader can use
LARGEST = 1e6  # from this up a ratio reads "over 1,000,000x"


def ratio_value(r: float | None) -> str:
    """A ratio's figure without its 'x', as people read it: 1.27, 34.3, 129,000, 'under 0.001',
    'over 1,000,000' (words, not '<', which Markdown would have to escape; no exponents)."""
    if r is None or (isinstance(r, float) and math.isnan(r)):
        return NA
    if math.isinf(r):
        return "inf" if r > 0 else "-inf"
    if r == 0:
        return "0"
    if abs(r) < SMALLEST:
        return f"under {SMALLEST:g}" if r > 0 else f"over -{SMALLEST:g}"
    if abs(r) >= LARGEST:
        return f"over {LARGEST:,.0f}" if r > 0 else f"under -{LARGEST:,.0f}"
    if abs(r) < 0.1:
        return f"{r:.2g}"  # 0.0012, 0.05: two figures, never an exponent from 0.001 up
    if abs(r) < 10:
        return f"{r:.2f}"
    if abs(float(f"{r:.3g}")) < 1000:  # 999.6 rounds to 1,000, below
        return f"{r:.3g}"
    return f"{float(f'{r:.3g}'):,.0f}"  # three figures, thousands separated: 129,000


def ratio_text(r: float | None) -> str:
    """An error-energy ratio: 1.27x, 34.3x, 129,000x, under 0.001x, over 1,000,000x (``ratio_value``)."""
    v = ratio_value(r)
    return v if v in (NA, "inf", "-inf") else f"{v}x"


def range_text(lo: float | None, hi: float | None, fmt=ratio_value) -> str:
    """An interval as words, '4.76 to 28.7' (a hyphen reads as a minus); one figure where both print
    alike ('169 at both bounds')."""
    a, b = fmt(lo), fmt(hi)
    return f"{a} to {b}" if a != b else f"{a} at both bounds" if a[:1].isdigit() else a


def level_text(alpha: float) -> str:
    """The confidence of an interval at ``alpha``: '95 %', '97.5 %'."""
    return f"{100 * (1 - alpha):.10g} %"


def ci_text(lo: float | None, hi: float | None, alpha: float = 0.05, fmt=ratio_value) -> str:
    """'95 % CI 4.76 to 28.7'."""
    return f"{level_text(alpha)} CI {range_text(lo, hi, fmt)}"


def percent_text(fraction: float | None) -> str:
    """A fraction as a percentage people read: 45 %, 1.4 %, 0.025 %, under 0.001 %, over 1,000 % (no exponents)."""
    if fraction is None or not math.isfinite(fraction):
        return NA
    x = 100 * fraction
    if x >= 1000:
        return "over 1,000 %"
    if 0 < abs(x) < 0.001:
        return "under 0.001 %"
    return f"{x:.0f} %" if abs(x) >= 10 else f"{x:.2g} %"


def count_text(n: int, cap: int = 100) -> str:
    """A count someone would act on ('about 12 seeds'), bounded: 'more than 100' past ``cap``."""
    return f"more than {cap}" if n > cap else f"about {n}"


def fmt_speedup(x: float | None) -> str:
    """Reference time / run time: '1.33x' (above 1: faster)."""
    return NA if x is None else f"{x:.2f}x"


def fmt_stat(name: str, x: float | None) -> str:
    """Frame counts as integers, everything else with four decimals."""
    if x is not None and name.endswith("_frames") and float(x).is_integer():
        return str(int(x))
    return fmt_num(x, 4)


def shown(x: float, digits: int) -> float:
    """``x`` as printed with ``digits`` decimals (a shorter form rounds that, not the raw value)."""
    return float(f"{x:.{digits}f}")


def fmt_rounded(x: float | None, digits: int, printed: int) -> str:
    """``digits`` decimals of the figure printed elsewhere with ``printed`` decimals."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return NA
    return f"{shown(x, printed):.{digits}f}"


def fmt_time(x: float | None) -> str:
    """Seconds as the pull request wrote them: one decimal from 10 s up, else three (of ``fmt_s``'s)."""
    if x is None:
        return NA
    x = shown(x, 1 if abs(x) >= 100 else 3)
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.3f}"
