"""index.html: a static page (no network) from Jinja2 templates, its figures and audio clips in
assets/ beside it, or inlined as data: URIs (``inline_media``) for a page that is one file.

The page opens with the review, then where the runs differ (``report.differ``), then every section
of report.md. Autoescaping is on for every value (run reasons and log tails come from files and
processes: they never inject markup); the Content-Security-Policy allows the page's one script
(templates/page.js, by its sha256), images and audio from its folder or data: URIs, nothing from
the network.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from harness.analysis.model import ReportResults, worst_frames
from harness.errors import HarnessError
from harness.report.accuracy import role_text
from harness.report.cells import Section

TEMPLATES = Path(__file__).parent / "templates"
LONG_ROWS = 12  # a table of more rows is folded (<details>) on the page
AUDIO_INLINE_BYTES = 6 * 1024 * 1024  # audio a one-file page carries (the clips' bytes, before base64)


def template_env() -> Environment:
    """The Jinja2 environment of the harness's page templates (autoescaping on, undefined names fatal)."""
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


# What the page shows where ``render_page`` is not told: ``review`` (``report.review.ReviewView``) and
# ``differ`` (``report.differ.DifferView``) are the blocks at its top; ``worst``: per run, its worst
# frames ({index: ["PSNR", "SSIM"]}); ``even``: the evenly spaced frames every run shows; ``roles``:
# each run's role as the tables name it; ``captions``: figure captions that say what a figure draws.
PAGE_DEFAULTS = dict(single_file=False, review=None, differ=None, worst={}, even=[], roles={}, captions={})


def render_page(res: Any, sections: list[Section], scenario_text: str, env_text: str, **page: Any) -> str:
    """The page of the template: ``res`` gives the title and footer (scenario_name, campaign_id,
    generated_at, harness_version, schema_version); ``page``: any of ``PAGE_DEFAULTS``."""
    css, js, script_hash = page_code()
    return (
        template_env()
        .get_template("index.html.j2")
        .render(
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
    )


def render_html(res: ReportResults, sections: list[Section], **page: Any) -> str:
    """The campaign's page (``page``: single_file, review, differ, captions). Where ``differ`` shows
    the frame grids, the frames section keeps its place and title (report.md and pr.md name it) and
    points at them; the summary's figure is the review's."""
    review, differ = page.get("review"), page.get("differ")
    scenario_text = yaml.safe_dump(res.scenario, sort_keys=False, allow_unicode=True) if res.scenario else ""
    shown = []
    for sec in sections:
        if sec.id == "frames" and differ is not None and differ.grids:
            sec = replace(sec, frame_grids=[])
        if sec.id == "summary" and review is not None:
            sec = replace(sec, images=[])
        shown.append(sec)
    worst = {k: v for seed in res.seeds or [None] for k, v in worst_frames(res, seed).items()}
    return render_page(
        res,
        shown,
        scenario_text,
        json.dumps(res.env, indent=2, default=str),
        **page,
        worst=worst,
        even=res.frame_indices,
        roles={r.key: role_text(res, r.arm, r.role) for r in res.runs},
    )


_IMG_SRC = re.compile(r'(<img\b[^>]*?\bsrc=")([^"]+)(")')
_AUDIO = re.compile(r'<audio\b[^>]*?\bsrc="([^"]+)"[^>]*></audio>')
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
         ".svg": "image/svg+xml", ".wav": "audio/wav", ".m4a": "audio/mp4", ".webm": "audio/webm",
         ".ogg": "audio/ogg", ".opus": "audio/ogg"}  # fmt: skip


def _file_under(src: str, base: Path, allowed: list[Path], root: Path, kind: str) -> Path:
    path = (base / unquote(src)).resolve()
    if not any(a in path.parents for a in allowed) or not path.is_file():
        raise HarnessError(f"{root}: {kind} {src} is not a file under the campaign")
    return path


def _data_uri(path: Path) -> str:
    mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def inline_media(page: str, root: Path, *more_roots: Path, audio_budget: int = AUDIO_INLINE_BYTES) -> str:
    """Every ``<img src>`` of ``page`` as a data: URI of the file it names, and every ``<audio src>``
    while the clips inlined stay within ``audio_budget`` bytes (a player beyond it: a line naming its
    file). A file not under ``root`` or one of ``more_roots`` (relative to ``root``) is an error: the
    page would show a hole, or carry a file it has no business with."""
    base = Path(root).resolve()
    allowed = [base, *(Path(r).resolve() for r in more_roots)]

    def embed(m: re.Match[str]) -> str:
        src = html.unescape(m.group(2))
        if src.startswith("data:"):
            return m.group(0)
        uri = _data_uri(_file_under(src, base, allowed, root, "image"))
        return f"{m.group(1)}{uri}{m.group(3)}"

    spent = 0

    def embed_audio(m: re.Match[str]) -> str:
        nonlocal spent
        src = html.unescape(m.group(1))
        if src.startswith("data:"):
            return m.group(0)
        path = _file_under(src, base, allowed, root, "audio clip")
        size = path.stat().st_size
        if spent + size > audio_budget:
            return (
                f'<span class="muted">clip not inlined (this one-file page carries at most '
                f"{audio_budget / 2**20:g} MiB of audio): {html.escape(src)} beside the campaign's page</span>"
            )
        spent += size
        return m.group(0).replace(f'src="{m.group(1)}"', f'src="{_data_uri(path)}"', 1)

    return _AUDIO.sub(embed_audio, _IMG_SRC.sub(embed, page))
