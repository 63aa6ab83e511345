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
