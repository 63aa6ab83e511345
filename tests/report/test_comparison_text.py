"""`harness compare` text: every note is printed once, in every format."""

from __future__ import annotations

from pathlib import Path

import pytest
from campaign_factory import ArmSpec, write_run

from harness.compare.pairwise import compare_runs
from harness.report.comparison import format_comparison


@pytest.mark.parametrize("fmt", ["md", "table"])
def test_each_note_is_printed_once(tmp_path: Path, fmt):
    ref = write_run(tmp_path / "a" / "torch_sdpa", ArmSpec("torch_sdpa", role="reference"))
    skipped = write_run(
        tmp_path / "b" / "sk", ArmSpec("sk", status="skipped", reason="backend x unavailable")
    )
    cmp = compare_runs(ref, skipped)
    assert cmp.notes
    text = format_comparison(cmp, fmt, width=400)
    for note in cmp.notes:
        assert text.count(note) == 1, (note, text)
