"""index.html: a static, self-contained page (no script, no network) from a Jinja2 template.

Autoescaping is on for every value, so run reasons and log tails (which come from files and
processes) can never inject markup; asset paths are percent-encoded relative URLs.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from harness.report.results import ReportResults
from harness.report.tables import Section
from harness.report.text import TextTable

TEMPLATES = Path(__file__).parent / "templates"


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["urlpath"] = lambda p: quote(str(p))
    return env


def render_html(res: ReportResults, sections: list[Section]) -> str:
    scenario_text = yaml.safe_dump(res.scenario, sort_keys=False, allow_unicode=True) if res.scenario else ""
    env_text = json.dumps(res.env, indent=2, default=str)
    return (
        _env()
        .get_template("index.html.j2")
        .render(res=res, sections=sections, scenario_text=scenario_text, env_text=env_text)
    )


def markdown_sections(text: str) -> list[Section]:
    """Headings, paragraphs and pipe tables of a generated markdown document, as report sections.

    Only the subset the harness itself writes is understood: `#` headings, `|` tables whose
    second line is the separator, `- ` bullets and plain lines.
    """
    sections: list[Section] = []
    sec: Section | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            title = line[level:].strip()
            if sec is None or level <= 2:
                sec = Section(id=f"s{len(sections)}", title=title)
                sections.append(sec)
            else:
                sec.tables.append(TextTable(title=title, headers=[]))
            i += 1
            continue
        if sec is None:
            sec = Section(id="s0", title="")
            sections.append(sec)
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|-: "):
            cells = lambda s: [c.strip() for c in s.strip().strip("|").split("|")]  # noqa: E731
            title = sec.tables.pop().title if sec.tables and not sec.tables[-1].headers else ""
            table = TextTable(title=title, headers=cells(line))
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                table.add(cells(lines[i]))
                i += 1
            sec.tables.append(table)
            continue
        if line.startswith("- "):
            sec.bullets.append(line[2:])
        elif line:
            sec.paragraphs.append(line)
        i += 1
    return sections


def kernels_html(result, markdown_text: str, out_dir: Path) -> Path:
    """index.html for a kernel benchmark: the markdown tables as a static page (same template)."""
    from types import SimpleNamespace

    from harness import __version__
    from harness.store import atomic_write_text

    res = SimpleNamespace(
        scenario_name=result.name,
        campaign_id="kernels",
        generated_at=result.created_at,
        harness_version=__version__,
        schema_version="kernels.json",
    )
    page = (
        _env()
        .get_template("index.html.j2")
        .render(
            res=res,
            sections=markdown_sections(markdown_text),
            scenario_text=yaml.safe_dump(result.block, sort_keys=False),
            env_text=json.dumps(result.env, indent=2, default=str),
        )
    )
    page = page.replace('<a href="results.json">results.json</a>', '<a href="kernels.json">kernels.json</a>')
    path = Path(out_dir) / "index.html"
    atomic_write_text(path, page)
    return path
