"""harness.text_table: markdown escaping, tables and fenced blocks."""

from harness.text_table import TextTable, md_code_block, md_rows, md_table


def test_md_code_block_cannot_be_closed_by_the_text():
    text = "a ``` b\n````"
    block = md_code_block(text)
    fence = block.split("text", 1)[0]
    assert len(fence) == 5 and block.rstrip().endswith(fence)


def test_md_rows_escape_cells_and_align_columns():
    lines = md_rows(["side", "seconds"], [["a|b", 1.5], ["<x>", "2\n3"]], align="lr")
    assert lines == ["| side | seconds |", "|---|---:|", "| a\\|b | 1.5 |", "| &lt;x&gt; | 2 3 |"]


def test_md_table_has_its_title_rows_and_notes():
    t = TextTable(title="Speed", headers=["arm", "s/step"])
    t.add(["sage", 0.5])
    t.notes.append("one run a side")
    text = md_table(t, level=4)
    assert text == "#### Speed\n\n| arm | s/step |\n|---|---|\n| sage | 0.5 |\n\n- one run a side\n"
