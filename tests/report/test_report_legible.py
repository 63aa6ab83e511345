"""What a reader meets in report.md, pr.md and the page says the same thing: a run's role is named
alike in every table and player, and every section pr.md and report.md point at is there, on the
page as in report.md (the page's own links land on something)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from records_testutil import CPU, ONE_SEED, example, rendered, voiced

from harness.report import render_results
from harness.report.accuracy import SHADOWED_COPY
from harness.report.figures import figure_captions

SHADOWED = ("ref_insitu", "bf16_insitu")  # the shadowed copies of the reference in shadowed_campaign


class Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts (the header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every table of a markdown file as rows of cell texts (the header row first)."""
    out, table = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            if table is None:
                table = []
                out.append(table)
            if not re.fullmatch(r"\|(-+\|)+", line):
                table.append([c.strip() for c in line.strip("|").split(" | ")])
        else:
            table = None
    return out


def role_cells(tables: list[list[list[str]]]) -> dict[str, set[str]]:
    """Per shadowed copy, the role cells of the rows that name it (by run key or arm) in a 'role' column."""
    out: dict[str, set[str]] = {}
    for rows in tables:
        if not rows or "role" not in rows[0]:
            continue
        col = rows[0].index("role")
        for row in rows[1:]:
            if len(row) > col and row[0] in SHADOWED:
                out.setdefault(row[0], set()).add(row[col])
    return out


def test_a_shadowed_copy_is_named_so_in_every_table_and_player(shadowed_campaign: Path):
    page = Tables()
    page.feed((shadowed_campaign / "index.html").read_text())
    md = (shadowed_campaign / "report.md").read_text()
    for where, cells in (
        ("index.html", role_cells(page.tables)),
        ("report.md", role_cells(markdown_tables(md))),
    ):
        assert set(cells) == set(SHADOWED), (where, cells)
        # the runs, speed (per arm and per run), accuracy and statistics tables, and (page) the players
        assert all(
            len(roles) and all(r.startswith(SHADOWED_COPY) for r in roles) for roles in cells.values()
        ), (
            where,
            cells,
        )
    players = next(t for t in page.tables if t and t[0] == ["run", "role", "listen"])
    assert {row[1] for row in players[1:] if row[0] in SHADOWED} == {SHADOWED_COPY}
    # the summary says the same: not a candidate
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert all(f"{arm} (shadowed copy, not a candidate)" in summary for arm in SHADOWED)
    # the latent table's column heads and the figures' legends name it the same way
    assert f"ref_insitu ({SHADOWED_COPY})" in md
    assert "| candidate |" not in "\n".join(
        ln for ln in md.splitlines() if ln.startswith(tuple(f"| {a}" for a in SHADOWED))
    )


SECTION_REF = re.compile(r"\bsections? (\d+[a-z]?)\b")


@pytest.mark.parametrize("results", [ONE_SEED, CPU], ids=["one-seed-with-assets", "two-seeds-no-assets"])
def test_every_section_pr_md_and_report_md_name_is_on_the_page(results, tmp_path):
    """A committed campaign rendered from its results.json (and the assets beside it, where kept)."""
    render_results(results, tmp_path)
    sections_named_are_on_the_page(tmp_path)


def test_every_section_a_shadowed_campaign_names_is_on_its_page(shadowed_campaign):
    # a test of its own: named in its signature, it runs on the worker that built that campaign
    sections_named_are_on_the_page(shadowed_campaign)


def sections_named_are_on_the_page(folder: Path) -> None:
    page = (folder / "index.html").read_text()
    md = (folder / "report.md").read_text()
    named = set(SECTION_REF.findall(md))
    assert not SECTION_REF.findall((folder / "pr.md").read_text())  # its reader has no report.md to open
    titles = dict(re.findall(r'<section id="([^"]+)">\s*<h2>([^<]+)</h2>', page))
    for n in named:
        assert re.search(rf"^## {n}\. ", md, re.M), f"report.md has no section {n}"
        assert any(t.startswith(f"{n}. ") for t in titles.values()), f"the page has no section {n}: {titles}"
    # the frames section keeps its place on the page and points at the grids it does not repeat
    frames = page.split('<section id="frames">', 1)[1].split("</section>", 1)[0]
    assert '<a href="#differ">' in frames and 'id="differ"' in page
    # and every link of the page to a place in it lands on something
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    targets = set(re.findall(r'href="#([^"]+)"', page))
    assert targets and targets <= ids, targets - ids


def test_the_figure_caption_on_the_page_names_what_the_figure_draws():
    """The accepted baseline (a star) is drawn in the figure and named in its caption (the committed
    one-seed campaign names sage_attn2); without one in the scenario, the caption names no star; the
    hollow floor markers are named where there is a floor."""
    with_star = example(ONE_SEED)
    assert with_star.scenario["accepted_baseline"] == "sage_attn2"
    no_star = with_star.model_copy(deep=True)
    del no_star.scenario["accepted_baseline"]
    no_star.rules.accepted_baseline = None  # the analysis reads the scenario's name into its rules
    no_floor = no_star.model_copy(update={"noise_floor_arms": []})
    for res, star, floor in ((with_star, True, True), (no_star, False, True), (no_floor, False, False)):
        caption = figure_captions(voiced(res))["speed_accuracy"]
        page = html.unescape(rendered(res, figure="assets/speed_accuracy.png")["html"])
        assert f"<figcaption>{caption}</figcaption>" in page
        assert ("a star marks the accepted baseline" in caption) == star
        assert ("hollow grey markers" in caption) == floor
