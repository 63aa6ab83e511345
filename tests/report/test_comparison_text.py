"""`harness compare` text: every note is printed once, in every format."""

from __future__ import annotations

import pytest
from records_testutil import CPU, example

from harness.report.comparison import format_comparison


@pytest.mark.parametrize("fmt", ["md", "table"])
def test_each_note_is_printed_once(fmt):
    """Comparisons of a committed results.json: a skipped run's (its note from the compare stage) and a
    measured one's, notes added."""
    res = example(CPU)
    skipped = next(c for c in res.comparisons if c.b.key == "sage_attn2@42")
    measured = next(c for c in res.comparisons if c.b.key == "sage_emul_thuml@42" and c.measured)
    measured = measured.model_copy(
        update={"notes": ["a note of the pair", "another note: the audio track is shorter"]}
    )
    for cmp in (skipped, measured):
        assert cmp.notes
        text = format_comparison(cmp, fmt, width=400)
        for note in cmp.notes:
            assert text.count(note) == 1, (note, text)


@pytest.mark.parametrize("fmt", ["md", "table"])
def test_a_table_of_nothing_recorded_is_left_out_and_one_line_says_so(fmt):
    """Runs that recorded no timing nor attention calls (ingested without logs): no speed or
    attention table, one headline; with one side recorded, both tables stay."""
    res = example(CPU)
    cmp = next(c for c in res.comparisons if c.b.key == "sage_emul_thuml@42" and c.measured)
    assert cmp.a.timing_source is not None and cmp.a.attn is not None
    bare = {"timing_source": None, "attn": None}
    none = cmp.model_copy(update={s: getattr(cmp, s).model_copy(update=bare) for s in ("a", "b")})
    text = format_comparison(none, fmt, width=400)
    line = f"no timing or attention records: A ({cmp.a.key}) and B ({cmp.b.key}) recorded none"
    assert text.count(line) == 1
    for gone in ("Speed (B against A)", "Attention calls per rank", "attention calls"):
        assert gone not in text, gone
    half = cmp.model_copy(update={"b": cmp.b.model_copy(update=bare)})
    text = format_comparison(half, fmt, width=400)
    assert "records:" not in text and "Speed (B against A)" in text and "Attention calls per rank" in text
    assert f"no timing: B ({cmp.b.key}) recorded no step times" in text
