"""Tables of strings and how they are written: markdown (GitHub-flavoured) and plain terminal text.

The one table helper of the harness: report.md, pr.md, ``harness compare``, the kernel report
and the benchmark tool all draw their tables here, so escaping and layout are decided once.
"""

from __future__ import annotations

from collections.abc import Sequence
from io import StringIO
from typing import Any

from pydantic import Field

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


def md_text(text: str) -> str:
    """Running markdown text: no raw HTML (a '<' would open a tag), no line breaks."""
    return str(text).replace("<", "&lt;").replace("\r", " ").replace("\n", " ")


def md_escape(text: str) -> str:
    """One table cell of markdown: no pipes, no newlines, no raw HTML."""
    return (
        str(text)
        .replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def md_rows(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "", *, escape: bool = True
) -> list[str]:
    """The lines of a markdown table, every cell escaped.

    ``align``: one letter per column, ``l`` (default) or ``r`` (a right-aligned number column).
    ``escape=False``: cells as given, for tables whose every cell the harness wrote itself and that
    are read back as text (the kernel report's page parses its own markdown).
    """
    cell = md_escape if escape else str
    marks = ["---:" if align[i : i + 1] == "r" else "---" for i in range(len(headers))]
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join(marks) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def md_table(t: TextTable, level: int = 3, align: str = "") -> str:
    """A table with its title as a heading of ``level`` and its notes as a list below it."""
    out = [f"{'#' * level} {md_escape(t.title)}", ""] if t.title else []
    out += md_rows(t.headers, t.rows, align)
    for n in t.notes:
        out.append(f"\n- {md_text(n)}")
    return "\n".join(out) + "\n"


def backtick_runs(line: str) -> list[str]:
    """The runs of consecutive backticks in ``line``."""
    runs, cur = [], ""
    for ch in line:
        if ch == "`":
            cur += ch
        elif cur:
            runs.append(cur)
            cur = ""
    if cur:
        runs.append(cur)
    return runs


def md_code_block(text: str, lang: str = "text") -> str:
    """A fenced block that the text cannot close early (fence longer than any backtick run)."""
    longest = max((len(run) for line in text.split("\n") for run in backtick_runs(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}\n"


def terminal_text(tables: list[TextTable], headlines: list[str], width: int) -> str:
    """Headlines, then each table drawn with rich for a ``width``-column terminal, as plain text."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = StringIO()
    con = Console(file=buf, width=width, color_system=None, force_terminal=False, highlight=False)
    for line in headlines:
        con.print(Text(line))
    for t in tables:
        rt = Table(title=t.title, title_justify="left")
        for h in t.headers:
            rt.add_column(h, overflow="fold")
        for row in t.rows:
            rt.add_row(*[Text(c) for c in row])  # Text: no markup parsing of log-derived strings
        con.print(rt)
        for n in t.notes:
            con.print(Text(f"  note: {n}"))
    return buf.getvalue()
