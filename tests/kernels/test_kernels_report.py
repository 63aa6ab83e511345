"""harness.kernels.report: the pull-request tables and the page built from them."""

from __future__ import annotations

import pytest

from harness.kernels.report import kernels_markdown, markdown_sections


@pytest.mark.slow
def test_smoke_markdown_has_every_row(smoke):
    md = kernels_markdown(smoke)
    for header in ("### Accuracy", "### Speed", "### Bitwise checks", "Matmul peak bfloat16"):
        assert header in md
    for r in smoke.rows:
        assert f"| {r.shape} | {r.label} |" in md
    assert "sage_emul_thuml (emulator)" in md
    assert "| self_1k | torch_sdpa | identical | identical | identical |" in md


def test_markdown_sections_parse_tables_and_escape_in_html(tmp_path):
    md = "## Title\n\nintro <b>line</b>\n\n### Table\n\n| a | b |\n|---|---|\n| 1 | <script>x</script> |\n- note\n"
    (sec,) = markdown_sections(md)
    assert sec.title == "Title" and sec.paragraphs == ["intro <b>line</b>"] and sec.bullets == ["note"]
    (table,) = sec.tables
    assert (
        table.title == "Table" and table.headers == ["a", "b"] and table.rows == [["1", "<script>x</script>"]]
    )
