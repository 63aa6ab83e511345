"""Where a run's attention code came from (a plugin file and its digest): below ``harness.records``
(a run spec carries it) and the scenario's plugin loader (which makes it), so both can import it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file, read in chunks (an mp4 is never held whole)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


class PluginRef(BaseModel):
    """Code a scenario brings in (``plugins:``, or an installed package's ``harness.plugins`` entry
    point), imported before the scenario is checked and again in every arm's process."""

    model_config = ConfigDict(extra="ignore")  # as every record: a newer field is not an error

    ref: str  # as the scenario writes it: a file (relative to the scenario) or a module name
    path: str  # the file imported (a package: its __init__.py)
    module: str | None = None  # the module name, when the plugin is a module and not a file
    sha256: str  # of the file at planning time; a changed file is a new spec (its arms run again)
    registers: list[str] = Field(default_factory=list)  # "attention backend fp16_chunked", ...
