"""One rule for "output bitwise the reference's" (``compare.pairwise.Bitwise.identical``): the verdict,
pr.md's facts, the comparison's headline and a shadowed copy's line all read it, so they agree on
a pair without audio (where four rules once disagreed), from a committed results.json."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest

from harness.analysis.energy import PairErrors
from harness.analysis.model import read_results
from harness.compare.pairwise import Bitwise
from harness.report.comparison import comparison_headlines
from harness.report.pr import facts

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "reports" / "examples" / "cpu" / "e2e_3step" / "results.json"


@pytest.mark.parametrize(("files", "video", "audio"), list(product([True, False, None], repeat=3)))
def test_the_rule_over_every_outcome(files, video, audio):
    got = Bitwise(files=files, video=video, audio=audio).identical
    if files is True:
        assert got is True  # the same bytes decode to the same frames and samples
    elif video is True and audio in (True, None):
        assert got is True  # a track the output does not have cannot differ
    elif video is False or audio is False:
        assert got is False
    else:
        assert got is None


@pytest.mark.parametrize(
    ("video", "audio", "same"), [(True, None, True), (True, True, True), (True, False, False)]
)
def test_every_reader_agrees_on_a_pair(video, audio, same):
    res = read_results(EXAMPLE)
    cand = next(c for c in res.comparisons if c.b.role == "candidate" and c.video is not None)
    pair = cand.model_copy(update={"bitwise": Bitwise(files=False, video=video, audio=audio)})
    res = res.model_copy(update={"comparisons": [pair]})
    assert PairErrors.from_comparison(pair).identical is same
    listed = [line for line in facts(res) if line.endswith(f": {pair.a.key} and {pair.b.key}")]
    assert bool(listed) is same
    if same:
        assert listed[0].startswith("video and audio" if audio else "video bitwise identical")
    headline = [line for line in comparison_headlines(pair) if line.startswith("bitwise identical")]
    assert headline and headline[0].startswith("bitwise identical: every decoded frame") is same
