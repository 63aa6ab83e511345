"""Campaign and run directory layout, records read and written, hashing and the campaign lock:

reports/<scenario>/<campaign-id>/
  campaign.json                 resolved scenario, environment, harness git SHA, arm status
  campaign.lock                 flock held by the writer working on it: run, ingest or report
  runs/<arm>[@seed]/            run.json, stdout.log, stderr.log, output.mp4, timing.json, attn_calls.json
  metrics/                      <a>__vs__<b>.json + .frames.csv per pair, <run>.stats.json per run
  report.md index.html results.json assets/"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from harness.errors import HarnessError
from harness.input_files import MAX_JSON_BYTES, read_input_bytes
from harness.number_format import fmt_s
from harness.records import (
    AttnCallsRecord,
    Record,
    RunRecord,
    RunStatus,
    TimingRecord,
    check_schema,
    role_rank,
)
from harness.records import file_sha256 as sha256_file  # noqa: F401 (re-exported: the one file digest)
from harness.safe_write import WriteError, atomic_write_text

R = TypeVar("R", bound=BaseModel)

RUN_JSON = "run.json"
CAMPAIGN_JSON = "campaign.json"
TIMING_JSON = "timing.json"
ATTN_CALLS_JSON = "attn_calls.json"
OUTPUT_MP4 = "output.mp4"
OUTPUT_LOSSLESS = "output_lossless.mkv"  # lossless twin of output.mp4 (builtin, diffusers: by default)
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
LOCK_FILE = "campaign.lock"
LAYERS_JSON = "layers.json"  # written by a runner that times every DiT block
EXTRAPOLATED = "~"  # the mark beside every extrapolated figure


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_record(path: Path, record: BaseModel) -> None:
    atomic_write_text(path, record.model_dump_json(indent=2, by_alias=True) + "\n")


def read_record(path: Path, model: type[R]) -> R:
    """A record file read into ``model``, its schema id checked; any problem is one HarnessError line."""
    path = Path(path)
    raw = read_input_bytes(path, "file", max_bytes=MAX_JSON_BYTES, allow_empty=True)
    try:
        check_schema(json.loads(raw), model, str(path))  # a SchemaMismatch line, not a ValueError
        return model.model_validate_json(raw)  # JSON mode: how "Infinity" and enums are read
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise HarnessError(f"{path}: invalid {model.__name__} at {loc}: {first['msg']}") from None
    except ValueError as err:
        raise HarnessError(f"{path}: not valid JSON ({err})") from None
    except RecursionError:
        raise HarnessError(f"{path}: not valid JSON (nested too deeply)") from None


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


def move_aside(path: Path) -> Path:
    """Rename a damaged file to ``<name>.corrupt-<UTC time>`` beside it (kept for a look, never read)."""
    path = Path(path)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, target)
    return target


class LayerTiming(Record):
    """layers.json: a DiT layer's seconds per step at ``seq_len`` rows over steps 2..N, and a step of
    the released depth extrapolated from it, marked ``EXTRAPOLATED`` wherever it is printed."""

    schema_version: str = Field("harness.lightx2v.layers/1", alias="schema")
    layers: int  # DiT blocks a step ran
    seq_len: int | None = None  # packed rows of every DiT attention call
    steps: list[int] = Field(default_factory=list)  # the steps the means are over
    step_s: float  # mean DiT step (the profiler's, max over ranks)
    layer_s: float  # mean seconds of one layer in a step (the slowest rank's blocks)
    outside_layers_s: float  # the rest of a step: pre/post infer, refiner, scheduler
    released_layers: int  # the released model's depth (MiniMax-H3: 50)
    released_step_s: float  # extrapolated: outside_layers_s + released_layers * layer_s
    text: str = ""

    def reading(self) -> str:
        rows = f" at {self.seq_len:,} packed rows" if self.seq_len else ""
        return (
            f"one DiT layer {fmt_s(self.layer_s)} s per step{rows} ({self.layers} layers timed, steps "
            f"{', '.join(map(str, self.steps))}; the rest of a step {fmt_s(self.outside_layers_s)} s); "
            f"a step of {self.released_layers} layers {fmt_s(self.released_step_s)} s{EXTRAPOLATED} "
            f"({EXTRAPOLATED}: extrapolated from {self.layers} layers)"
        )


class ArmStatus(Record):
    key: str
    arm: str
    seed: int
    role: str
    attn_type: str
    kv_reversed: bool = False
    input: str | None = Field(None, exclude_if=lambda v: v is None)  # the spec's
    status: RunStatus = RunStatus.pending
    reason: str | None = None
    valid: bool | None = None
    repeat: int = 1

    @classmethod
    def of(cls, rec: RunRecord) -> ArmStatus:
        s = rec.spec
        return cls(
            key=s.key, arm=s.arm, seed=s.seed, role=s.role.value, attn_type=s.attn_type,
            kv_reversed=s.kv_reversed, input=s.input, status=rec.status, reason=rec.reason, valid=rec.valid,
            repeat=s.repeat,
        )  # fmt: skip


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

    def record_or_none(self) -> RunRecord | None:
        """run.json parsed once; None when it is absent or damaged."""
        try:
            return self.record() if self.exists() else None
        except HarnessError:
            return None

    def write(self, record: RunRecord) -> None:
        """run.json replaced by ``record``; when that fails, a stale "running" one is removed (the next
        ``harness run`` runs it again)."""
        try:
            write_record(self.run_json, record)
        except WriteError as err:
            if record.status != RunStatus.running:
                stale = self.record_or_none()
                if stale is not None and stale.status == RunStatus.running:
                    with contextlib.suppress(OSError):
                        self.run_json.unlink()
                        err.message += (
                            f"; the run ended {record.status.value}, and its run.json, which still said running, "
                            "was removed (the next harness run runs it again)"
                        )
            raise

    def _optional(self, name: str, model: type[R]) -> R | None:
        return read_record(self.path / name, model) if (self.path / name).exists() else None

    def timing(self) -> TimingRecord | None:
        return self._optional(TIMING_JSON, TimingRecord)

    def layers(self) -> LayerTiming | None:
        return self._optional(LAYERS_JSON, LayerTiming)

    def attn_calls(self) -> AttnCallsRecord | None:
        return self._optional(ATTN_CALLS_JSON, AttnCallsRecord)


class CampaignDir:
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

    @property
    def lock_file(self) -> Path:
        return self.path / LOCK_FILE

    def record_or_rebuilt(self) -> tuple[CampaignRecord, str | None]:
        """campaign.json, or when damaged a stand-in from the run folders, and why."""
        try:
            return self.record(), None
        except HarnessError as err:
            if not self.campaign_json.exists():
                raise
            problem = f"{err} (the report is built from the run folders)"
        recs = [rec for run in self.runs() if (rec := run.record_or_none()) is not None]
        last = recs[-1].spec if recs else None
        stand_in = CampaignRecord(
            campaign_id=self.path.name,
            scenario_name=last.scenario if last else self.path.parent.name,
            scenario={},
            runner=last.runner if last else "builtin",
            created_at=utcnow(),
            arms=sorted((ArmStatus.of(rec) for rec in recs), key=lambda a: role_rank(a.role)),
        )
        return stand_in, problem

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
