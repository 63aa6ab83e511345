"""index.html: a static, self-contained page (no script, no network) from a Jinja2 template.

Autoescaping is on for every value, so run reasons and log tails (which come from files and
processes) can never inject markup; asset paths are percent-encoded relative URLs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from harness.report.results import ReportResults
from harness.report.tables import Section

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


def render_page(res: Any, sections: list[Section], scenario_text: str, env_text: str) -> str:
    """The page of the template: ``res`` gives the title and footer (scenario_name, campaign_id,
    generated_at, harness_version, schema_version)."""
    return (
        _env()
        .get_template("index.html.j2")
        .render(res=res, sections=sections, scenario_text=scenario_text, env_text=env_text)
    )


def render_html(res: ReportResults, sections: list[Section]) -> str:
    scenario_text = yaml.safe_dump(res.scenario, sort_keys=False, allow_unicode=True) if res.scenario else ""
    return render_page(res, sections, scenario_text, json.dumps(res.env, indent=2, default=str))
