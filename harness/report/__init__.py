"""Campaign report: report.md (every table, a summary first), pr.md (the pull request's compact
tables), index.html (static CI page, beside assets/ or one file), results.json, assets/.

``build_report`` computes (or reuses from metrics/) every comparison against the reference,
draws the figures, cuts the frame thumbnails and writes the three files atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.report.results import ReportResults, collect_results
from harness.report.tables import FrameGrid
from harness.scenario.verdict import VerdictRules
from harness.store import CampaignDir, atomic_write_text, write_record

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportPaths:
    campaign: Path
    report_md: Path
    index_html: Path
    results_json: Path
    assets: Path
    errors: tuple[str, ...] = ()  # bad input met while measuring; the report is written regardless
    pr_md: Path | None = None  # the pull request's compact tables

    def items(self) -> Iterator[tuple[str, Path]]:
        """(label, path) pairs for printing: report.md, pr.md, index.html, results.json."""
        yield "report.md", self.report_md
        if self.pr_md is not None:
            yield "pr.md", self.pr_md
        yield "index.html", self.index_html
        yield "results.json", self.results_json


def _rel(path: Path, root: Path) -> str:
    return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()


def _frame_grids(res: ReportResults, campaign: CampaignDir, say: Progress) -> list[FrameGrid]:
    from harness.report.frames import frame_indices, run_thumbnails

    ref = next((r for r in res.primary_runs if r.arm == res.reference_arm and r.stats), None)
    basis = ref or next((r for r in res.primary_runs if r.stats), None)
    if basis is None or basis.stats is None:
        return []
    res.frame_indices = frame_indices(basis.stats.frames)
    out_dir = campaign.assets_dir / "frames"
    grids = []
    for seed in res.seeds or [None]:
        runs = [r for r in res.primary_runs if r.seed == seed]
        grid = FrameGrid(
            title=f"seed {seed}" if seed is not None else "frames",
            indices=res.frame_indices,
            columns=[r.key for r in runs],
            cells={},
        )
        for r in runs:
            if not r.ok or r.output is None or r.output_sha256 is None:
                grid.missing[r.key] = f"no output ({r.status})" if not r.ok else "no output.mp4"
                continue
            say(f"frames of {r.key}")
            try:
                files = run_thumbnails(r.key, Path(r.output), r.output_sha256, res.frame_indices, out_dir)
            except HarnessError as err:
                grid.missing[r.key] = f"cannot decode: {err}"
                continue
            grid.cells[r.key] = {i: _rel(p, campaign.path) for i, p in files.items()}
            for i in res.frame_indices:
                if i not in files:
                    grid.missing.setdefault(r.key, f"only {r.stats.frames if r.stats else '?'} frames")
        grids.append(grid)
    return grids


def _figures(res: ReportResults, campaign: CampaignDir, say: Progress) -> dict[str, str]:
    from harness.report import plots

    assets = campaign.assets_dir
    seed = res.primary_seed
    images: dict[str, str] = {}

    def label(key: str, role: str) -> str:
        return key + (" (noise floor)" if role == "noise_floor" else "")

    def attempt(name: str, fn) -> None:
        try:
            path = fn(assets / f"{name}.png")
        except HarnessError as err:
            res.notes.append(f"figure {name}: {err}")
            return
        if path is not None:
            images[name] = _rel(path, campaign.path)

    say("figures")
    cmps = [c for c in res.comparisons if c.b.seed == seed and c.frames_csv]
    attempt(
        "per_frame",
        lambda p: plots.per_frame_plot([(label(c.b.key, c.b.role), Path(c.frames_csv)) for c in cmps], p),
    )

    def audio(p: Path):
        from harness.media import read_audio

        tracks = []
        ordered = sorted(
            (r for r in res.primary_runs if r.seed == seed and r.ok and r.output),
            key=lambda r: r.arm != res.reference_arm,
        )
        for r in ordered:
            try:
                data, rate = read_audio(r.output)
            except HarnessError as err:
                res.notes.append(f"audio figure: {r.key}: {err}")
                continue
            tracks.append((label(r.key, r.role), data, rate))
        return plots.audio_plot(tracks, p) if len(tracks) >= 1 else None

    attempt("audio", audio)
    attempt(
        "step_times",
        lambda p: plots.step_times_plot(
            [(r.key, r.step_seconds) for r in res.primary_runs if r.seed == seed and r.step_seconds], p
        ),
    )
    latent_series = []
    for s in res.latents:
        if s.seed != seed:
            continue
        names = sorted({n for pt in s.points for n in pt.parts})
        if names:  # one line per named latent (video, audio): they part at different rates
            for n in names:
                pts = [(pt.step, pt.parts[n]) for pt in s.points if n in pt.parts]
                latent_series.append((f"{label(s.key, s.role)}: {n}", pts))
        else:
            latent_series.append((label(s.key, s.role), [(pt.step, pt.psnr) for pt in s.points]))
    attempt("latents", lambda p: plots.latent_plot(latent_series, p))
    if res.multi_seed:
        band = None
        if res.floor is not None and "psnr" in res.floor.band:
            lo, _, hi = res.floor.band["psnr"]
            band = (lo, hi)
        series = []
        for a in res.arms:
            if a.role != "candidate":
                continue
            pts = [(c.b.seed, c.video.psnr_pooled) for c in res.comparisons if c.b.arm == a.arm and c.video]
            series.append((a.arm, pts))
        attempt("seeds", lambda p: plots.seeds_plot(series, band, p))
    return images


def build_report(
    campaign: CampaignDir,
    *,
    progress: Progress | None = None,
    rules: VerdictRules | None = None,
    single_file: bool | None = None,
) -> ReportPaths:
    """Write report.md, pr.md, index.html, results.json and assets/ into the campaign directory.

    ``rules``: how verdicts and speed tests judge (default: the campaign's scenario's).
    ``single_file``: index.html with every image inlined (one file that opens anywhere); None
    takes the scenario's ``report.single_file`` (default: a page beside its assets/ folder).
    """
    from harness.report.html import inline_images, render_html
    from harness.report.markdown import render_markdown
    from harness.report.pr import render_pr
    from harness.report.summary import SPEEDUP_CONVENTION, summary_section
    from harness.report.tables import build_sections

    say = progress or (lambda _msg: None)
    res = collect_results(campaign, progress=say, rules=rules)
    campaign.assets_dir.mkdir(parents=True, exist_ok=True)
    grids = _frame_grids(res, campaign, say)
    images = _figures(res, campaign, say)
    res.assets = dict(images)
    for g in grids:
        for key, cells in g.cells.items():
            for i, rel in cells.items():
                res.assets[f"frame:{key}:{i}"] = rel
    res.conventions["speedup"] = SPEEDUP_CONVENTION
    sections = [summary_section(res), *build_sections(res, grids, images)]
    if single_file is None:
        single_file = bool((res.scenario.get("report") or {}).get("single_file"))
    paths = ReportPaths(
        campaign=campaign.path,
        report_md=campaign.path / "report.md",
        index_html=campaign.path / "index.html",
        results_json=campaign.path / "results.json",
        assets=campaign.assets_dir,
        errors=tuple(res.errors),
        pr_md=campaign.path / "pr.md",
    )
    say("write report")
    write_record(paths.results_json, res)
    atomic_write_text(paths.report_md, render_markdown(res, sections))
    atomic_write_text(paths.pr_md, render_pr(res))
    page = render_html(res, sections, single_file=single_file)
    atomic_write_text(paths.index_html, inline_images(page, campaign.path) if single_file else page)
    return paths


__all__ = ["ReportPaths", "ReportResults", "build_report", "collect_results"]
