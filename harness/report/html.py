"""index.html: a static page from Jinja2 templates (the review, where the runs differ, report.md's sections),
media in assets/ or inlined; every value autoescaped (logs come from processes), a CSP with no network."""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from harness.analysis.model import FrameGrid, ReportResults, worst_frames
from harness.errors import HarnessError
from harness.report.accuracy import role_text
from harness.report.cells import ROLE_LABEL, Section
from harness.report.figures import AssetReader

TEMPLATES = Path(__file__).parent / "templates"
LONG_ROWS = 12  # a table of more rows is folded (<details>) on the page
AUDIO_INLINE_BYTES = 6 * 1024 * 1024  # audio a one-file page carries (the clips' bytes, before base64)


def template_env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["urlpath"] = lambda p: quote(str(p))
    env.globals["worst_text"] = worst_text
    return env


def worst_text(worst: dict[str, dict[int, list[str]]], columns: list[str], frame: int) -> str:
    """A grid row's label: whose worst frame it is, by which metric ('worst PSNR: a; worst SSIM: a')."""
    return "; ".join(f"worst {m}: {col}" for col in columns for m in worst.get(col, {}).get(frame, []))


@functools.cache
def page_code() -> tuple[str, str, str]:
    """(stylesheet, script, the script's CSP source 'sha256-...') of the page."""
    css = (TEMPLATES / "page.css").read_text()
    js = (TEMPLATES / "page.js").read_text()
    digest = base64.b64encode(hashlib.sha256(js.encode()).digest()).decode("ascii")
    return css, js, f"sha256-{digest}"


# What the page shows where not told: the review and differ blocks at its top; per run its worst frames
# ({index: ["PSNR"]}); the evenly spaced frames; each run's role as tables name it; figure captions.
PAGE_DEFAULTS = dict(single_file=False, review=None, differ=None, worst={}, even=[], roles={}, captions={})


def render_page(res: Any, sections: list[Section], scenario_text: str, env_text: str, **page: Any) -> str:
    """The page: ``res`` gives the title and footer; ``page``: any of ``PAGE_DEFAULTS``."""
    css, js, script_hash = page_code()
    template = template_env().get_template("index.html.j2")
    return template.render(
        {**PAGE_DEFAULTS, **page},
        res=res,
        sections=sections,
        scenario_text=scenario_text,
        env_text=env_text,
        long_rows=LONG_ROWS,
        page_css=Markup(css),
        page_js=Markup(js),
        script_hash=script_hash,
        audio_limit_mb=AUDIO_INLINE_BYTES / 2**20,
    )


def render_html(res: ReportResults, sections: list[Section], **page: Any) -> str:
    """The campaign's page; where ``differ`` shows the frame grids the frames section keeps only its place
    and title (report.md and pr.md name it), and the summary's figure is the review's."""
    review, differ = page.get("review"), page.get("differ")
    scenario_text = yaml.safe_dump(res.scenario, sort_keys=False, allow_unicode=True) if res.scenario else ""
    cleared = {"frames": {"frame_grids": []}} if differ is not None and differ.grids else {}
    cleared |= {"summary": {"images": []}} if review is not None else {}
    shown = [replace(sec, **cleared.get(sec.id, {})) for sec in sections]
    worst = {k: v for seed in res.seeds or [None] for k, v in worst_frames(res, seed).items()}
    env_text = json.dumps(res.env, indent=2, default=str)
    roles = {r.key: role_text(res, r.arm, r.role) for r in res.runs}
    return render_page(
        res, shown, scenario_text, env_text, **page, worst=worst, even=res.frame_indices, roles=roles
    )


@dataclass(frozen=True)
class Clip:
    key: str
    role: str
    path: str | None  # from the page's folder; None: missing
    missing: str = ""


@dataclass
class DifferView:
    grids: list[FrameGrid] = field(default_factory=list)  # cells and diffs as the page links them
    diff_text: str = ""  # how the difference images were made (the gain)
    diff_gain: float | None = None
    diff_top: float | None = None  # levels at the top of the colour scale
    diff_scale: str | None = None  # colour bar image (grey; coloured like the difference images)
    diff_tables: tuple[str, str, str] | None = None  # the colour map as SVG transfer tables (R, G, B)
    clips: list[Clip] = field(default_factory=list)
    clips_text: str = ""
    specdiff: str | None = None  # the spectrogram-difference figure
    insitu: list[tuple[str, str]] = field(default_factory=list)  # (caption, image)
    # per grid: the run the compare control opens on
    shown_first: list[str | None] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.grids or self.clips or self.specdiff or self.insitu)


def transfer_tables(colours: list[str]) -> tuple[str, str, str] | None:
    """SVG feComponentTransfer tables (R, G, B) mapping grey through ``colours`` ('#rrggbb'), evenly spaced."""
    try:
        rgb = [tuple(int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)) for c in colours]
    except (ValueError, IndexError):
        return None
    if len(rgb) < 2:
        return None
    return tuple(" ".join(f"{c[k]:.4f}" for c in rgb) for k in range(3))


def differ_view(
    res: ReportResults, grids: list[FrameGrid], assets: AssetReader, placed, images: dict[str, str]
) -> DifferView:
    """``placed(path)``: a file as the page links it; ``grids``: placed already; ``images``: figures by name."""
    view = DifferView(grids=grids)
    role = {r.key: r.role for r in res.runs}
    for g in grids:  # the first candidate with a difference image, else the first run with one
        with_diff = [k for k in g.columns if k in g.diffs]
        view.shown_first.append(
            next((k for k in with_diff if role.get(k) == "candidate"), None) or next(iter(with_diff), None)
        )
    if res.frame_diff is not None:
        fd = res.frame_diff
        view.diff_text, view.diff_gain, view.diff_top = fd.text, fd.gain, fd.full_scale
        p = assets.path(fd.scale, page=True) if fd.scale else None
        view.diff_scale = placed(p) if p is not None else None
        view.diff_tables = transfer_tables(fd.colours)
    for r in res.first_seed_runs:
        rel = res.assets.get(f"clip:{r.key}")
        if rel is not None:
            p = assets.path(rel, page=True)
            path, missing = (placed(p), "") if p is not None else (None, f"missing: {rel}")
            view.clips.append(Clip(r.key, ROLE_LABEL.get(r.role, r.role), path, missing))
    view.clips_text = res.audio_clips.text if res.audio_clips is not None else ""
    view.specdiff = images.get("spectrogram_diff")
    # the in-situ heatmaps: figures and PNG assets whose name starts with ``insitu``
    view.insitu = [
        (name.replace(":", " ").replace("_", " "), path)
        for name, path in images.items()
        if name.startswith("insitu")
    ]
    view.insitu += [
        (f"in-situ attention error: {name.split(':', 1)[-1]}", placed(p))
        for name, rel in sorted(res.assets.items())
        if name.startswith("insitu") and rel.lower().endswith(".png") and (p := assets.path(rel)) is not None
    ]
    return view


def placed_grids(res: ReportResults, assets: AssetReader, placed) -> list[FrameGrid]:
    """The frame grids with their files as the page links them; a thumbnail not there is named missing."""
    grids = []
    for g in res.frame_grids:
        grid = g.model_copy(deep=True)
        grid.cells, grid.diffs = {}, {}
        for target, source, page in ((grid.cells, g.cells, False), (grid.diffs, g.diffs, True)):
            for key, cells in source.items():
                for i, rel in cells.items():
                    # the thumbnails are report.md's and named when missing; a missing difference
                    # (the page's) is not drawn
                    p = assets.path(rel, page=page)
                    if p is not None:
                        target.setdefault(key, {})[i] = placed(p)
                    elif not page:
                        grid.missing.setdefault(key, f"missing: {rel}")
        grids.append(grid)
    return grids


_IMG_SRC = re.compile(r'(<img\b[^>]*?\bsrc=")([^"]+)(")')
_AUDIO = re.compile(r'(<audio\b[^>]*?\bsrc=")([^"]+)("[^>]*></audio>)')
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
         ".svg": "image/svg+xml", ".wav": "audio/wav", ".m4a": "audio/mp4", ".webm": "audio/webm",
         ".ogg": "audio/ogg", ".opus": "audio/ogg"}  # fmt: skip


def inline_media(page: str, root: Path, results_dir: Path) -> str:
    """Every ``<img src>`` of ``page`` as a data: URI, and every ``<audio src>`` within ``AUDIO_INLINE_BYTES``
    (beyond: a line naming its file); a file not under ``root`` or ``results_dir`` is an error."""
    allowed = [Path(root).resolve(), Path(results_dir).resolve()]
    spent = 0

    def embed(m: re.Match[str]) -> str:
        nonlocal spent
        src = html.unescape(m.group(2))
        if src.startswith("data:"):
            return m.group(0)
        kind = "audio clip" if m.group(1).startswith("<audio") else "image"
        path = (allowed[0] / unquote(src)).resolve()
        if not any(a in path.parents for a in allowed) or not path.is_file():
            raise HarnessError(f"{root}: {kind} {src} is not a file under the campaign")
        if kind == "audio clip":
            if spent + path.stat().st_size > AUDIO_INLINE_BYTES:
                return (
                    f'<span class="muted">clip not inlined (this one-file page carries at most {AUDIO_INLINE_BYTES / 2**20:g}'
                    f" MiB of audio): {html.escape(src)} beside the campaign's page</span>"
                )
            spent += path.stat().st_size
        mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"{m.group(1)}data:{mime};base64,{data}{m.group(3)}"

    return _AUDIO.sub(embed, _IMG_SRC.sub(embed, page))
