"""The one text guard: free text put into markdown (report.md, pr.md, the job summary, the kernel
report) makes no link, image, autolink or HTML and starts no block; text put into a CSV cell is
no spreadsheet formula. Checked with a real CommonMark parser (markdown-it, GFM tables on)."""

from __future__ import annotations

import csv
import io

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from harness.errors import visible
from harness.text_table import csv_cell, md_alt, md_code, md_escape, md_rows, md_text, md_unescape

MD = MarkdownIt("commonmark").enable("table")
ACTIVE = {"link_open", "image", "html_inline", "html_block"}

HOSTILE = [
    "![x](https://track.example/p.png)",
    "[click](javascript:alert(1))",
    "<https://evil.example>",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "# heading\n## another",
    "- item\n> quote",
    "1. first",
    "```\nfence",
    "    indented code",
    "[ref]: https://evil.example\n[ref]",
    "\\[x](https://evil.example)",
    "\\\\![x](https://evil.example)",
    "a\r\nb\u2028c\x0bd\x0ce\x85f",
    "===",
    "---",
    "_ __",
    "_\t_ _",
    "* * *",
    "*** ",
    "x](https://evil.example) ![y",
    "&#91;x&#93;(https://evil.example)",
    "see https://evil.example and www.evil.example and a@evil.example",
]

# Markdown's own characters and URL pieces, so that the search finds constructs quickly.
PIECES = list("![]()<>`\\#*_-+=|:/.@&;~ \n\r\t1aw") + ["https://e.x", "www.", "javascript:", "&lt;", "    "]
TEXT = st.lists(st.sampled_from(PIECES), max_size=25).map("".join) | st.text(max_size=40)


def tokens(markdown: str) -> list:
    """Every token of ``markdown``, inline children included."""
    out, todo = [], list(MD.parse(markdown))
    while todo:
        t = todo.pop()
        out.append(t)
        todo += t.children or []
    return out


def active(markdown: str) -> list[str]:
    return [t.type for t in tokens(markdown) if t.type in ACTIVE]


def blocks(markdown: str) -> list[str]:
    return [t.type for t in MD.parse(markdown) if t.nesting >= 0 and t.type != "inline"]


def test_hostile_text_makes_no_link_image_or_html_in_running_text_or_cells():
    for text in HOSTILE:
        assert active(md_text(text)) == [], text
        assert active("- " + md_text(text)) == [], text
        assert active("\n".join(md_rows(["a", "b"], [[text, text]]))) == [], text
        assert active("## " + md_escape(text)) == [], text


def test_running_text_starts_no_block_and_breaks_no_line():
    for text in HOSTILE:
        out = md_text(text)
        assert "\n" not in out and "\r" not in out, text
        assert blocks(out) in ([], ["paragraph_open"]), (text, out, blocks(out))
        assert (
            blocks("- " + out) == ["bullet_list_open", "list_item_open", "paragraph_open"] or not out.strip()
        )


def test_text_reads_the_same_after_escaping():
    """What a reader sees (the rendered text) is what was given, newlines aside."""
    text = "a [b] <c> d|e \\ f *g* #h https://x.example www.y a@b.c"
    rendered = MD.renderInline(md_text(text))
    assert rendered == "a [b] &lt;c&gt; d|e \\ f <em>g</em> #h https://x.example www.y a@b.c"
    assert md_unescape(md_escape(text)) == text
    assert md_unescape(md_text(text)) == text


def test_names_and_numbers_stay_as_they_were():
    """The harness's own words and figures are not touched (the committed examples stay as they are)."""
    for text in ("torch_sdpa", "sage_emul_thuml (emulator)", "-0.500 s", "1.23x", "42.1 dB", "n/a"):
        assert md_text(text) == text
        assert md_escape(text) == text


def test_md_code_is_one_code_span():
    for text in ["a`b", "``x``", "`", "a\nb", "<img src=x>", "[x](https://e.x)"]:
        toks = [t for t in tokens("see " + md_code(text) + " here") if t.type == "code_inline"]
        assert len(toks) == 1 and active("see " + md_code(text)) == [], text
        assert toks[0].content.strip() == text.replace("\n", " ").strip()


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised():
    for text in ('=HYPERLINK("https://e.x","x")', "+1+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(text)[0] not in "=+-@\t\r", text
    for value in (-1.5, 2, 0.0, None, "-1.5", "-3", "1e-3", "torch_sdpa"):
        assert csv_cell(value) == value


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_no_construct_from_any_text_in_running_text(text):
    out = md_text(text)
    assert active(out) == [] and active("- " + out) == [] and active("x " + out + " y") == []
    assert blocks(out) in ([], ["paragraph_open"])
    assert blocks("- " + out) in (
        ["bullet_list_open", "list_item_open", "paragraph_open"],
        ["bullet_list_open", "list_item_open"],
    )


@settings(max_examples=300, deadline=None)
@given(TEXT, TEXT)
def test_no_construct_from_any_text_in_cells_headings_and_alt_text(a, b):
    table = "\n".join(md_rows(["a", "b"], [[a, b], [b, a]]))
    assert active(table) == []
    body = [t for t in MD.parse(table) if t.type == "tr_open"]
    assert len(body) == 3  # the head and two rows, whatever the cells hold
    assert [t.type for t in MD.parse("## " + md_escape(a))] == ["heading_open", "inline", "heading_close"]
    img = [t for t in tokens(f"![{md_alt(a)}](f.png) {md_text(b)}") if t.type in ACTIVE]
    assert [(t.type, t.attrGet("src")) for t in img] == [("image", "f.png")]
    assert active(md_text(a) + md_text(b)) == [] and active(md_escape(a) + md_escape(b)) == []


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_escaping_is_undone_for_the_page(text):
    flat = text
    for ch in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029":
        flat = flat.replace(ch, " ")
    flat = visible(flat)  # a control or direction character reads as its escape on the page too
    assert md_unescape(md_escape(text)) == flat and md_unescape(md_alt(text)) == flat


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=20), st.floats(allow_nan=False), st.integers(), st.none()))
def test_csv_cell_read_back_is_no_formula(value):
    buf = io.StringIO()
    csv.writer(buf).writerow([csv_cell(value)])
    (cell,) = next(csv.reader(io.StringIO(buf.getvalue()))) or [""]
    if isinstance(value, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
        float(cell)  # only a number may start so
