"""harness.number_format: how numbers and speed ratios are written."""

from harness.number_format import one_liner, speed_words


def test_speed_words_and_one_liner():
    assert speed_words(0.82) == "1.22x faster"
    assert speed_words(1.5) == "1.50x slower"
    assert speed_words(1.0) == "same speed"
    assert speed_words(None) == "n/a"
    assert one_liner("s/step", 1.234, 1.010) == "s/step: 1.234 s -> 1.010 s: 1.22x faster"
    assert one_liner("s/step", None, 1.0) is None
