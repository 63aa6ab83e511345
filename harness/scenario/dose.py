"""A dose-response campaign as a scenario writes it (the ``dose_response:`` block): planted errors of
known size (``harness.attention.planted``) on every call, one candidate arm per (shape, dose), run
beside the reference and its floor; the analysis reads how much per-call error the pipeline absorbs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.insitu_records import CallSiteFilter

PLANTED = "planted_error"  # the backend every dose arm runs
# What a run keeps of dose_response_from's results.json (its path, sha256 and dose-response) in the
# campaign: the analysis reads nothing outside the campaign folder (its campaign.json may come from
# anywhere)
SOURCE_COPY = "dose_response_source.json"
MIN_DOSES = 2  # a curve needs two points; the committed examples use six or more
EVERY_CALL = "all"  # the site of every call: its arms' names and options name no site


class DoseResponseBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    doses: list[float] = Field(
        description="Per-call rel L1 of the planted error, each in (0, 1): a log grid spanning the floor's "
        "own per-call error up to a clearly damaging one (e.g. 1e-4 to 1e-1).",
    )
    shapes: list[Literal["noise", "scale"]] = Field(
        default_factory=lambda: ["noise"],
        description="noise: each element times 1 +- dose, seeded signs; scale: out x (1 - dose), the shape "
        "of scored padded keys.",
    )
    seed: int = Field(0, ge=0, description="Seed of the planted noise's signs.")
    sites: dict[str, CallSiteFilter] = Field(
        default_factory=lambda: {EVERY_CALL: CallSiteFilter()},
        description="Where the error is planted, by name: each the calls of its `kinds` (dit_self, refiner, "
        "cross, other), DiT `steps` (from 1) and `blocks` (from 0), the other calls exact; `{}` is every "
        "call. One curve per site: a site per step reads the sensitivity per step.",
    )

    @field_validator("doses")
    @classmethod
    def _grid(cls, v: list[float]) -> list[float]:
        if len(v) < MIN_DOSES or len(set(v)) != len(v):
            raise ValueError(f"at least {MIN_DOSES} distinct doses")
        if any(not 0 < d < 1 for d in v):
            raise ValueError("every dose is a rel L1 in (0, 1)")
        return sorted(v)

    @field_validator("sites")
    @classmethod
    def _site_names(cls, v: dict[str, CallSiteFilter]) -> dict[str, CallSiteFilter]:
        if not v:
            raise ValueError("at least one site (`all: {}` plants on every call)")
        if bad := [n for n in v if not n.replace("_", "").isalnum()]:
            raise ValueError(f"site name {bad[0]!r}: letters, digits and _ only (it names arms)")
        return v


class DoseResponseSource(BaseModel):
    """A dose-response measured in another campaign, read for this one's in-situ candidates."""

    model_config = ConfigDict(extra="forbid")

    results: str = Field(
        description="Its results.json (relative to where harness runs, or ${SCENARIO_DIR}/...)."
    )
    sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="That file's sha256: another file is refused, not read."
    )


def read_source(source: DoseResponseSource) -> tuple[dict[str, Any] | None, str]:
    """What a run keeps of the named results.json (its path, sha256 and dose-response), or None and
    why it cannot be used (missing, another file, no dose-response in it)."""
    where = f"dose_response_from.results: {source.results}"
    try:
        data = Path(source.results).read_bytes()
    except OSError as err:
        return None, f"{where}: {err.strerror or err}"
    if (got := hashlib.sha256(data).hexdigest()) != source.sha256:
        return None, f"{where} has sha256 {got}, not the {source.sha256} named"
    try:
        curves = json.loads(data)["dose_response"]
    except (ValueError, KeyError, TypeError):
        curves = None
    if not isinstance(curves, dict):
        return None, f"{where}: holds no dose-response (the results.json of a dose_response campaign)"
    return {"results": source.results, "sha256": got, "dose_response": curves}, ""


def dose_arms(block: DoseResponseBlock) -> list[dict[str, Any]]:
    """The candidate arms the block stands for, one per (shape, site, dose), each run once per seed."""
    arms = []
    for shape in block.shapes:
        for site, where in block.sites.items():
            restricted = {"site": where.model_dump(exclude_defaults=True)} if not where.everywhere else {}
            named = f"dose_{shape}_" if site == EVERY_CALL else f"dose_{shape}_{site}_"
            arms += [
                {
                    "name": f"{named}{dose:g}",
                    "attn_type": PLANTED,
                    "attn_options": {"dose": dose, "shape": shape, "seed": block.seed, **restricted},
                    "repeats": 1,  # an accuracy point: its timing is exact SDPA's plus a multiply
                    "description": f"planted error: {shape}, per-call rel L1 {dose:g}"
                    + (f" on {where.text()}" if restricted else ""),
                }
                for dose in block.doses
            ]
    return arms


def with_dose_arms(data: Any) -> Any:
    """A scenario's fields with the dose arms added to its arms (those already there kept: a resolved
    scenario, which lists them, reads back the same)."""
    if not isinstance(data, dict) or not isinstance(data.get("dose_response"), dict):
        return data
    try:
        block = DoseResponseBlock.model_validate(data["dose_response"])
    except ValueError:
        return data  # the field's own validation says what is wrong, with its line
    arms = list(data.get("arms") or [])
    have = {a.get("name") for a in arms if isinstance(a, dict)}
    return {**data, "arms": arms + [a for a in dose_arms(block) if a["name"] not in have]}
