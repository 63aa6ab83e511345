"""harness.number_format: how numbers are written."""

import math
import re

from hypothesis import given
from hypothesis import strategies as st

from harness.number_format import (
    ci_text,
    count_text,
    fmt_db,
    fmt_ratio,
    fmt_s,
    fmt_stat,
    percent_text,
    range_text,
    ratio_text,
)


def test_number_formats():
    assert fmt_db(math.inf) == "inf (identical)" and fmt_db(38.4) == "38.40 dB" and fmt_db(None) == "n/a"
    assert fmt_ratio(1.19) == "1.190x" and fmt_ratio(math.nan) == "n/a"
    assert fmt_s(0.4512) == "0.451" and fmt_s(123.45) == "123.5"
    assert fmt_stat("black_frames", 3.0) == "3" and fmt_stat("luma_mean", 114.65531) == "114.6553"


EXPONENT = re.compile(r"\d[eE][+-]?\d")


def test_ratios_read_without_exponents():
    assert [ratio_text(x) for x in (1.274, 34.31, 885.2, 129034.0, 5.78e8, 3.69e-301, 0.0012, 0.0)] == [
        "1.27x", "34.3x", "885x", "129,000x", "over 1,000,000x", "under 0.001x", "0.0012x", "0x",
    ]  # fmt: skip
    assert [ratio_text(x) for x in (999.4, 999.6, -999.6)] == ["999x", "1,000x", "-1,000x"]  # at the seam
    assert range_text(3.69e-301, 6.33e-301) == "under 0.001"  # both bounds print the same: one figure
    assert (
        range_text(8.04, 13.71) == "8.04 to 13.7" and ci_text(4.76, 28.7, 0.025) == "97.5 % CI 4.76 to 28.7"
    )
    assert (
        percent_text(5.8) == "580 %"
        and percent_text(58.0) == "over 1,000 %"
        and percent_text(0.45) == "45 %"
        and percent_text(1e-6) == "under 0.001 %"
        and percent_text(2.5e-4) == "0.025 %"
    )
    assert count_text(885) == "more than 100" and count_text(12) == "about 12"


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True))
def test_no_number_from_the_world_prints_an_exponent(a, b):
    for text in (ratio_text(a), range_text(a, b), percent_text(a), ci_text(a, b)):
        assert not EXPONENT.search(text), text


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1e9))
def test_figures_are_words_markdown_prints_as_they_are(r, fraction):
    """No '<' or '>' in a figure: a Markdown writer escapes '<' as '&lt;', which report.md would show."""
    for text in (ratio_text(r), range_text(r, -r), percent_text(fraction)):
        assert "<" not in text and ">" not in text, text
