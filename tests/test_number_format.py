"""harness.number_format: how numbers are written."""

import math

from harness.number_format import fmt_db, fmt_ratio, fmt_s, fmt_stat


def test_number_formats():
    assert fmt_db(math.inf) == "inf (identical)" and fmt_db(38.4) == "38.40 dB" and fmt_db(None) == "n/a"
    assert fmt_ratio(1.19) == "1.190x" and fmt_ratio(math.nan) == "n/a"
    assert fmt_s(0.4512) == "0.451" and fmt_s(123.45) == "123.5"
    assert fmt_stat("black_frames", 3.0) == "3" and fmt_stat("luma_mean", 114.65531) == "114.6553"
