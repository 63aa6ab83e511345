"""index.html: a static page (no script, no network) from a Jinja2 template, its figures in assets/
beside it, or all inlined as data: URIs (``inline_images``) for a page that is one file.

Autoescaping is on for every value, so run reasons and log tails (which come from files and
processes) can never inject markup; asset paths are percent-encoded relative URLs.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from harness.analysis.model import ReportResults
from harness.errors import HarnessError
from harness.report.cells import Section

TEMPLATES = Path(__file__).parent / "templates"


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
    return env


def render_page(
    res: Any, sections: list[Section], scenario_text: str, env_text: str, *, single_file: bool = False
) -> str:
    """The page of the template: ``res`` gives the title and footer (scenario_name, campaign_id,
    generated_at, harness_version, schema_version)."""
    return (
        template_env()
        .get_template("index.html.j2")
        .render(
            res=res,
            sections=sections,
            scenario_text=scenario_text,
            env_text=env_text,
            single_file=single_file,
        )
    )


def render_html(res: ReportResults, sections: list[Section], *, single_file: bool = False) -> str:
    scenario_text = yaml.safe_dump(res.scenario, sort_keys=False, allow_unicode=True) if res.scenario else ""
    return render_page(
        res, sections, scenario_text, json.dumps(res.env, indent=2, default=str), single_file=single_file
    )


_IMG_SRC = re.compile(r'(<img\b[^>]*?\bsrc=")([^"]+)(")')
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}


def inline_images(page: str, root: Path, *more_roots: Path) -> str:
    """Every ``<img src="relative path">`` of ``page`` becomes a data: URI of the file it names.

    Paths are relative to ``root``; the file must lie under ``root`` or one of ``more_roots`` (the
    results' folder when the page is written elsewhere). Any other path is an error (the page
    would show a hole, or carry a file it has no business with)."""
    base = Path(root).resolve()
    allowed = [base, *(Path(r).resolve() for r in more_roots)]

    def embed(m: re.Match[str]) -> str:
        src = html.unescape(m.group(2))
        if src.startswith("data:"):
            return m.group(0)
        path = (base / unquote(src)).resolve()
        if not any(a in path.parents for a in allowed) or not path.is_file():
            raise HarnessError(f"{root}: image {src} is not a file under the campaign")
        mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"{m.group(1)}data:{mime};base64,{data}{m.group(3)}"

    return _IMG_SRC.sub(embed, page)
