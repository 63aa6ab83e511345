"""harness.kernels.report: the pull-request tables and the page built from them."""

from __future__ import annotations

import pytest

from harness.kernels.report import ReportText, kernels_markdown


@pytest.mark.slow
def test_smoke_markdown_has_every_row(smoke):
    md = kernels_markdown(smoke)
    for header in ("### Accuracy", "### Speed", "### Bitwise checks", "Matmul peak bfloat16"):
        assert header in md
    for r in smoke.rows:
        assert f"| {r.shape} | {r.label} |" in md
    assert "sage_emul_thuml (emulator)" in md
    assert "| self_1k | torch_sdpa | identical | identical | identical |" in md


def test_the_page_section_is_the_markdown_as_it_reads(tmp_path):
    page = ReportText("Title")
    page.para("intro &lt;b&gt;line&lt;/b&gt;")
    page.table("Table", ["a", "b"], [["1", "<script>x</script>"]])
    page.table("Empty", ["a"], [])
    page.bullet("note")
    assert page.lines == [
        "## Title", "", "intro &lt;b&gt;line&lt;/b&gt;", "", "### Table", "", "| a | b |", "|---|---|",
        "| 1 | &lt;script&gt;x&lt;/script&gt; |", "- note",
    ]  # fmt: skip
    sec = page.section
    assert sec.title == "Title" and sec.paragraphs == ["intro <b>line</b>"] and sec.bullets == ["note"]
    (table,) = sec.tables
    assert (
        table.title == "Table" and table.headers == ["a", "b"] and table.rows == [["1", "<script>x</script>"]]
    )
