"""Tables of strings written as markdown (GitHub-flavoured) or terminal text, and markdown escaping:
the one table helper of every report and command, so escaping and layout are decided once."""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Sequence
from io import StringIO
from typing import Any

from pydantic import Field

from harness.errors import visible
from harness.records import Record


class TextTable(Record):
    """A table as strings: rendered to markdown, to the terminal (rich) and to HTML."""

    title: str
    headers: list[str]
    rows: list[list[str]] = Field(default_factory=list)
    row_classes: list[str] = Field(default_factory=list)  # one per row ("" = none), for HTML
    notes: list[str] = Field(default_factory=list)

    def add(self, row: list[Any], css: str = "") -> None:
        self.rows.append([str(c) for c in row])
        self.row_classes.append(css)


# Line ends as CommonMark or a browser may read them: each becomes a space (no new line, no new block).
LINE_BREAKS = str.maketrans({c: " " for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})
# What could open an autolink or HTML: escaped wherever free text goes ('&' too, so that an entity
# reads as written). Backticks stay: a code span shows its text as is (reasons quote `pkg>=1.0`).
_INLINE = [("\\", "\\\\"), ("&", "&amp;"), ("<", "&lt;"), ("://", "\\://")]
# A link or an image needs '](' or '][' (or a definition, '[x]: url' where a block starts): a ']'
# before '(' or '[', and a '[' or '(' that starts the text (the text before may end in ']'), are
# escaped; the brackets of '[0.5x, 2x]' stay as they are.
_BRACKETS = re.compile(r"^[\[(]|\](?=[(\[])")
# GFM's bare-URL and e-mail autolinks: broken by escaping '://', 'www.' and an address's '@'.
_WWW = re.compile(r"(?i)(www)\.")
_EMAIL = re.compile(r"@(?=[\w-]+\.[\w-])")  # an e-mail's '@' (a run key's 'arm@42' stays)
# A line start that opens a block: heading, quote, table row, list item, thematic break (spaces
# may part its marks: '_ __'), setext line, fence.
_BLOCK_START = re.compile(
    r"^(?:[#>|]|[-+*=_](?=[\s]|$)|([-*_=])(?=\1)|`(?=``)|~(?=~~)|\d{1,9}(?=[.)](?:\s|$)))"
)


def _inline(text: str) -> str:
    out = visible(str(text).translate(LINE_BREAKS))
    for a, b in _INLINE:
        out = out.replace(a, b)
    out = _BRACKETS.sub(lambda m: "\\" + m.group(0), out)
    return _EMAIL.sub(r"\\@", _WWW.sub(r"\1\\.", out))


def md_text(text: str) -> str:
    """Markdown text that reads as written: no link, image, autolink, HTML, line break or block."""
    out = _inline(str(text).translate(LINE_BREAKS).lstrip(" \t"))
    m = _BLOCK_START.match(out)
    if m is None:
        return out
    at = m.end() if out[:1].isdigit() else 0  # '1.': the mark after the digits; else the first character
    return out[:at] + "\\" + out[at:]


def md_escape(text: str) -> str:
    """One table cell (or a heading, or bold text) of markdown: md_text's guard, and no pipes, no '>'."""
    return _inline(text).replace("|", "\\|").replace(">", "&gt;")


def md_alt(text: str) -> str:
    """An image's alt text: md_escape, and every bracket and backtick escaped (md_escape's pairs kept)."""
    return re.sub(
        r"\\.|([\[\]`])", lambda m: "\\" + m.group(1) if m.group(1) else m.group(0), md_escape(text)
    )


def _fence(text: str, least: int = 1) -> str:
    """A run of backticks longer than any in ``text`` (and at least ``least``): nothing closes it early."""
    return "`" * max(least, max(map(len, re.findall("`+", text)), default=0) + 1)


def md_code(text: str) -> str:
    """Inline code (not for a table cell): the text shown as is; nothing in it is markdown."""
    flat = visible(str(text).translate(LINE_BREAKS)) or " "
    fence = _fence(flat)
    pad = " " if flat[:1] == "`" or flat[-1:] == "`" or (flat.startswith(" ") and flat.endswith(" ")) else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


_UNESCAPE = re.compile(
    r"\\([!-/:-@\[-`{-~])|(&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});)"
)


def md_unescape(text: str) -> str:
    """Markdown text as it reads (backslash escapes and entities resolved)."""
    return _UNESCAPE.sub(lambda m: m.group(1) or html.unescape(m.group(2)), text)


_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet does not run: text starting with = + - @, tab or CR gets a leading
    quote; numbers stay numbers."""
    if not isinstance(value, str) or value[:1] not in ("=", "+", "-", "@", "\t", "\r"):
        return value
    return value if _NUMBER.fullmatch(value) else "'" + value


def md_rows(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> list[str]:
    """The lines of a markdown table, every cell escaped; ``align``: ``l`` or ``r`` per column."""
    marks = ["---:" if align[i : i + 1] == "r" else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(map(md_escape, row)) + " |" for row in [headers, *rows]]
    return [lines[0], "|" + "|".join(marks) + "|", *lines[1:]]


def md_table(t: TextTable, level: int = 3, align: str = "") -> str:
    """A table with its title as a heading of ``level`` and its notes as a list below it."""
    out = [f"{'#' * level} {md_escape(t.title)}", ""] if t.title else []
    out += md_rows(t.headers, t.rows, align) + [f"\n- {md_text(n)}" for n in t.notes]
    return "\n".join(out) + "\n"


def md_code_block(text: str, lang: str = "text") -> str:
    """A fenced block the text cannot close early, its control characters made visible."""
    text = "\n".join(visible(line) for line in str(text).split("\n"))
    fence = _fence(text, 3)
    return f"{fence}{lang}\n{text}\n{fence}\n"


def terminal_text(tables: list[TextTable], headlines: list[str], width: int | None = None) -> str:
    """Headlines, then each table drawn with rich for a ``width``-column terminal (default: this one's,
    at least 60), as plain text."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    width = width or max(60, shutil.get_terminal_size((100, 40)).columns)
    buf = StringIO()
    con = Console(file=buf, width=width, color_system=None, force_terminal=False, highlight=False)
    for line in headlines:
        con.print(Text(visible(line)))
    for t in tables:
        rt = Table(title=Text(visible(t.title)), title_justify="left")
        for h in t.headers:
            rt.add_column(visible(h), overflow="fold")
        for row in t.rows:
            rt.add_row(*[Text(visible(c)) for c in row])  # Text: no markup parsing of log-derived strings
        con.print(rt)
        for n in t.notes:
            con.print(Text(visible(f"  note: {n}")))
    return buf.getvalue()
