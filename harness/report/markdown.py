"""report.md: the tables that go into the pull request (GitHub-flavoured markdown)."""

from __future__ import annotations

from urllib.parse import quote

from harness.analysis.model import FrameGrid, ReportResults
from harness.report.cells import Section
from harness.text_table import md_alt, md_code_block, md_escape, md_table, md_text


def _img(path: str, alt: str) -> str:
    """An image of the campaign's assets: the path (from the records) stays relative, no '//host'."""
    href = quote(path)
    return f"![{md_alt(alt)}]({'./' + href.lstrip('/') if href.startswith('/') else href})"


def _grid(g: FrameGrid) -> str:
    head = "| frame | " + " | ".join(md_escape(c) for c in g.columns) + " |"
    out = [f"#### {md_escape(g.title)}", "", head, "|" + "---|" * (len(g.columns) + 1)]
    for i in g.indices:
        cells = []
        for col in g.columns:
            p = g.cells.get(col, {}).get(i)
            cells.append(_img(p, f"{col} frame {i}") if p else md_escape(g.missing.get(col, "n/a")))
        out.append(f"| {i} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def render_section(sec: Section) -> str:
    parts = [f"## {md_escape(sec.title)}", ""]
    parts += [md_text(p) + "\n" for p in sec.paragraphs]
    parts += [md_table(t, level=3) for t in sec.tables]
    parts += [_img(path, caption) + "\n" for caption, path in sec.images]
    parts += [_grid(g) for g in sec.frame_grids]
    for v in sec.verdicts:
        parts.append(f"**{md_escape(v.arm)}**: {md_text(v.summary)}\n")
        parts += [*(f"- {md_text(s)}" for s in v.sentences), ""]
    for title, text in sec.logs:
        parts += [f"**{md_escape(title)}**\n", md_code_block(text)]
    if sec.bullets:
        parts += [*(f"- {md_text(b)}" for b in sec.bullets), ""]
    return "\n".join(parts).rstrip() + "\n"


def render_markdown(res: ReportResults, sections: list[Section]) -> str:
    title = f"# {md_escape(res.scenario_name)}: {md_escape(res.campaign_id)}"
    end = f"_Machine-readable results: `results.json` (schema {md_escape(res.schema_version)})._\n"
    return "\n".join([title, "", *(render_section(s) for s in sections), end])
