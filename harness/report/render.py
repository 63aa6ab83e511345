"""Rendering a results.json into report.md, pr.md, index.html, benchmark.json and the figures, from it and the
assets it names alone, into ``out_dir`` (default: its folder), linking the assets from there."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from harness.analysis.model import FrameGrid, ReportResults
from harness.report.cells import Section, review_view
from harness.report.figures import AssetReader, draw_figures, figure_captions
from harness.safe_write import atomic_write_text
from harness.text_table import md_alt, md_code_block, md_escape, md_table, md_text

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportPaths:
    report_md: Path
    index_html: Path
    results_json: Path
    benchmark_json: Path  # the speed figures, github-action-benchmark's custom format
    pr_md: Path  # the pull request's compact tables
    errors: tuple[str, ...] = ()  # bad input met while measuring; the report is written regardless
    figures: dict[str, Path] = field(default_factory=dict)  # figure name -> PNG

    def items(self) -> Iterator[tuple[str, Path]]:
        yield "report.md", self.report_md
        yield "pr.md", self.pr_md
        yield "index.html", self.index_html
        yield "results.json", self.results_json


def placed(path: Path, out_dir: Path) -> str:
    """``path`` as the page in ``out_dir`` links it."""
    return Path(os.path.relpath(path, Path(out_dir).resolve())).as_posix()


def summary_section(res: ReportResults) -> Section:
    """The summary (``analysis.sentences`` wrote it) as the report's first section, in markdown and HTML alike."""
    return Section("summary", "Summary", bullets=list(res.summary.lines))


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


def render(
    res: ReportResults,
    results_json: Path,
    out_dir: Path | None = None,
    *,
    single_file: bool | None = None,
    progress: Progress | None = None,
) -> ReportPaths:
    from harness.report.html import differ_view, inline_media, placed_grids, render_html
    from harness.report.pr import render_pr, write_benchmark
    from harness.report.tables import build_sections

    say = progress or (lambda _msg: None)
    results_dir = Path(results_json).parent
    out = Path(out_dir) if out_dir is not None else results_dir
    res = res.model_copy(update={"notes": list(res.notes)})  # render notes stay out of results.json
    assets = AssetReader(results_dir)
    grids = placed_grids(res, assets, lambda p: placed(p, out))
    say("figures")
    figures = draw_figures(res, assets, out, res.notes)
    out.mkdir(parents=True, exist_ok=True)  # after the names are checked: a refusal leaves no folder
    images = {name: placed(p.resolve(), out) for name, p in figures.items()}
    differ = differ_view(res, grids, assets, lambda p: placed(p, out), images)
    res.notes.extend(f"asset missing: {rel} (named in results.json, not beside it)" for rel in assets.missing)
    summary = summary_section(res)
    if "speed_accuracy" in images:
        summary.images.append(("Speed against accuracy", images["speed_accuracy"]))
    sections = [summary, *build_sections(res, grids, images)]
    if single_file is None:
        single_file = bool((res.scenario.get("report") or {}).get("single_file"))
    paths = ReportPaths(
        report_md=out / "report.md",
        index_html=out / "index.html",
        results_json=Path(results_json),
        errors=tuple(res.errors),
        pr_md=out / "pr.md",
        figures=figures,
        benchmark_json=out / "benchmark.json",
    )
    say("write report")
    atomic_write_text(paths.report_md, render_markdown(res, sections))
    atomic_write_text(paths.pr_md, render_pr(res))
    write_benchmark(res, paths.benchmark_json)
    review, captions = review_view(res, images.get("speed_accuracy")), figure_captions(res)
    page = render_html(
        res, sections, single_file=single_file, review=review, differ=differ, captions=captions
    )
    atomic_write_text(paths.index_html, inline_media(page, out, results_dir) if single_file else page)
    return paths
