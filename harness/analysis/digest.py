"""What an analysis read, as one digest, so that an unchanged campaign is not analysed again: campaign.json,
every file under runs/, the campaign's place, the rules, this stage's version and the harness code."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from harness.analysis.model import RESULTS_SCHEMA, ReportResults
from harness.compare.hashes import FileHashes
from harness.records import canonical_hash
from harness.scenario.verdict import VerdictRules
from harness.store import CampaignDir

# 2: a shadowed copy of the exact trajectory is no candidate; 3: the headline ratio is the decisive one
ANALYSIS_VERSION = 3
PACKAGE = Path(__file__).resolve().parents[1]
RENDERERS = ("report", "cli")  # their code changes no result


@functools.cache
def code_digest() -> str:
    """sha256 of the harness source that computes results (sorted paths and contents)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in RENDERERS or rel.parts[0].startswith(RENDERERS):
            continue
        h.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def campaign_json_digest(path: Path) -> str:
    """campaign.json's content but its ``updated_at`` (all a ``harness run`` that reruns nothing changes)."""
    data = path.read_bytes()
    try:
        record = json.loads(data)
        record.pop("updated_at", None)
        return canonical_hash(record)
    except (ValueError, AttributeError):  # damaged: its bytes
        return hashlib.sha256(data).hexdigest()


def inputs_digest(campaign: CampaignDir, hashes: FileHashes, rules: VerdictRules | None) -> str:
    files = {"campaign.json": campaign_json_digest(campaign.campaign_json)}
    if campaign.runs_dir.is_dir():
        for path in sorted(campaign.runs_dir.rglob("*")):
            if path.is_file():
                rel = path.relative_to(campaign.path).as_posix()
                try:
                    files[rel] = hashes.sha256(path)
                except OSError:  # removed meanwhile (the analysis names what is missing)
                    files[rel] = "unreadable"
    return canonical_hash(
        {
            "analysis": ANALYSIS_VERSION,
            "code": code_digest(),
            "campaign": str(campaign.path.resolve()),
            "rules": rules.model_dump() if rules is not None else None,
            "files": files,
        }
    )


def reusable(results_json: Path, digest: str) -> ReportResults | None:
    """The results.json at ``results_json`` when it is this digest's analysis with every asset present."""
    try:
        res = ReportResults.model_validate_json(results_json.read_bytes())
    except (OSError, ValueError):
        return None
    if res.schema_version != RESULTS_SCHEMA or res.inputs_digest != digest:
        return None
    root = results_json.parent
    if not all((root / rel).is_file() for rel in res.assets.values()):
        return None
    return res
