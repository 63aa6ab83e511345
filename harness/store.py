"""Campaign and run directory layout, atomic writes, manifests and hashing.

reports/<scenario>/<campaign-id>/
  campaign.json                 resolved scenario, environment, harness git SHA, arm status
  runs/<arm>[@seed]/            run.json, stdout.log, stderr.log, output.mp4, timing.json, attn_calls.json
  metrics/                      <a>__vs__<b>.json + .frames.csv per pair, <run>.stats.json per run
  report.md index.html results.json assets/
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from harness.errors import HarnessError
from harness.records import AttnCallsRecord, Record, RunRecord, RunStatus, TimingRecord

R = TypeVar("R", bound=BaseModel)

RUN_JSON = "run.json"
CAMPAIGN_JSON = "campaign.json"
TIMING_JSON = "timing.json"
ATTN_CALLS_JSON = "attn_calls.json"
OUTPUT_MP4 = "output.mp4"
OUTPUT_LOSSLESS = "output_lossless.mkv"  # opt-in lossless twin of output.mp4 (builtin runner)
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temp file in the same folder and rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def write_record(path: Path, record: BaseModel) -> None:
    atomic_write_text(path, record.model_dump_json(indent=2, by_alias=True) + "\n")


def read_record(path: Path, model: type[R]) -> R:
    path = Path(path)
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise HarnessError(f"{path}: file not found") from None
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise HarnessError(f"{path}: invalid {model.__name__} at {loc}: {first['msg']}") from None
    except ValueError as err:
        raise HarnessError(f"{path}: not valid JSON ({err})") from None


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def tail_text(path: Path, lines: int = 40, max_bytes: int = 64_000) -> str:
    """The last lines of a log file (reads only its end)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


class ArmStatus(Record):
    key: str
    arm: str
    seed: int
    role: str
    attn_type: str
    kv_reversed: bool = False
    status: RunStatus = RunStatus.pending
    reason: str | None = None
    valid: bool | None = None
    repeat: int = 1


class CampaignRecord(Record):
    """campaign.json: what was asked, where, with what software, and how each arm ended."""

    schema_version: str = Field("harness.campaign/1", alias="schema")
    campaign_id: str
    scenario_name: str
    scenario_file: str | None = None
    scenario_sha256: str | None = None
    scenario: dict[str, Any]  # resolved (env-expanded, validated) scenario
    kind: str = "e2e"
    profile: str | None = None
    runner: str
    executor: str = "local"
    created_at: str
    updated_at: str | None = None
    harness_version: str | None = None
    env: dict[str, Any] = Field(default_factory=dict)  # environment fingerprint
    arms: list[ArmStatus] = Field(default_factory=list)


class RunDir:
    """One arm run's directory and the files in it."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @property
    def key(self) -> str:
        return self.path.name

    def file(self, name: str) -> Path:
        return self.path / name

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def output(self) -> Path:
        return self.path / OUTPUT_MP4

    def exists(self) -> bool:
        return self.run_json.exists()

    def record(self) -> RunRecord:
        return read_record(self.run_json, RunRecord)

    def write(self, record: RunRecord) -> None:
        write_record(self.run_json, record)

    def timing(self) -> TimingRecord | None:
        p = self.path / TIMING_JSON
        return read_record(p, TimingRecord) if p.exists() else None

    def attn_calls(self) -> AttnCallsRecord | None:
        p = self.path / ATTN_CALLS_JSON
        return read_record(p, AttnCallsRecord) if p.exists() else None


class CampaignDir:
    """A campaign directory: runs/, metrics/, report files and campaign.json."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @property
    def campaign_json(self) -> Path:
        return self.path / CAMPAIGN_JSON

    @property
    def runs_dir(self) -> Path:
        return self.path / "runs"

    @property
    def metrics_dir(self) -> Path:
        return self.path / "metrics"

    @property
    def assets_dir(self) -> Path:
        return self.path / "assets"

    def run(self, key: str) -> RunDir:
        return RunDir(self.runs_dir / key)

    def runs(self) -> Iterator[RunDir]:
        if self.runs_dir.is_dir():
            for p in sorted(self.runs_dir.iterdir()):
                if (p / RUN_JSON).exists():
                    yield RunDir(p)

    def exists(self) -> bool:
        return self.campaign_json.exists()

    def record(self) -> CampaignRecord:
        return read_record(self.campaign_json, CampaignRecord)

    def write(self, record: CampaignRecord) -> None:
        record.updated_at = utcnow()
        write_record(self.campaign_json, record)


def pair_metrics_stem(key_a: str, key_b: str) -> str:
    return f"{key_a}__vs__{key_b}"


def resolve_run_dir(ref: str) -> RunDir:
    """A run named by its directory, or CAMPAIGN_DIR:ARM (arm key such as ``torch_sdpa`` or ``arm@43``)."""
    path = Path(ref)
    if (path / RUN_JSON).exists():
        return RunDir(path)
    if ":" in ref:
        camp, _, key = ref.rpartition(":")
        run = CampaignDir(Path(camp)).run(key)
        if run.exists():
            return run
        raise HarnessError(f"{ref}: campaign {camp} has no run {key!r} (no {run.run_json})")
    if path.exists():
        raise HarnessError(f"{ref}: not a run directory (no {RUN_JSON} inside)")
    raise HarnessError(f"{ref}: no such run directory")


def find_campaign(ref: str | Path) -> CampaignDir:
    """A campaign directory, or a scenario folder (reports/<scenario>) whose newest campaign is taken."""
    path = Path(ref)
    if (path / CAMPAIGN_JSON).exists():
        return CampaignDir(path)
    if path.is_dir():
        camps = sorted(p for p in path.iterdir() if (p / CAMPAIGN_JSON).exists())
        if camps:
            return CampaignDir(camps[-1])
        raise HarnessError(f"{path}: not a campaign directory (no {CAMPAIGN_JSON} here or in a subfolder)")
    raise HarnessError(f"{path}: no such campaign directory")
