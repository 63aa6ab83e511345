"""harness.text_table: markdown escaping, tables and fenced blocks."""

from hypothesis import given
from hypothesis import strategies as st

from harness.text_table import (
    TextTable,
    md_alt,
    md_code,
    md_code_block,
    md_escape,
    md_rows,
    md_table,
    md_text,
    terminal_text,
    visible,
)


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


# Everything a terminal or a viewer acts on instead of showing (the guard's set, written out here).
UNSEEN = {chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))} | set(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def test_control_and_direction_characters_are_shown_not_obeyed():
    hostile = "boom\x1b[2J\x1b]0;pwned\x07 \x1b]8;;https://x\x1b\\link\u202eevil\x9b"
    shown = "boom\\x1b[2J\\x1b]0;pwned\\x07 \\x1b]8;;https://x\\x1b\\link\\u202eevil\\x9b"
    assert visible(hostile) == shown
    assert visible("tab\tand\nnew line stay; é, 日本, 🙂 too") == "tab\tand\nnew line stay; é, 日本, 🙂 too"
    table = TextTable(title=f"t{hostile}", headers=[f"h{hostile}"], notes=[hostile])
    table.add([hostile])
    for written in (
        md_table(table),
        md_code_block(hostile),
        md_code(hostile),
        terminal_text([table], [hostile], 200),
    ):
        assert "\\x1b" in written and not UNSEEN & set(written), written


@given(st.text())
def test_no_writer_lets_an_unseen_character_through(text):
    table = TextTable(title=text, headers=[text], notes=[text])
    table.add([text])
    for written in (md_text(text), md_escape(text), md_alt(text), md_code(text), md_table(table),
                    md_code_block(text), terminal_text([table], [text], 120)):  # fmt: skip
        assert not UNSEEN & set(written)
