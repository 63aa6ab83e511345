"""One run's own account of itself (no decoding). Unreadable side files are notes, except the two a verdict
rests on (timing.json, output.mp4 against run.json's hash): those leave an ok run ``damaged``, never judged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import Field

from harness.collect.models import RunStats
from harness.compare.hashes import PROCESS_HASHES, FileHashes
from harness.errors import HarnessError
from harness.records import (
    AttentionChoice,
    MachineLoad,
    PluginRef,
    RankCalls,
    Record,
    RunStatus,
)
from harness.run_keys import sample_label
from harness.safe_write import resolve_under
from harness.store import (
    OUTPUT_LOSSLESS,
    STDERR_LOG,
    STDOUT_LOG,
    ArmStatus,
    LayerTiming,
    RunDir,
    tail_text,
)

LOG_TAIL_LINES = 25
T = TypeVar("T")


class AttnSummary(Record):
    requested: str
    kv_reversed: bool = False
    ranks: dict[str, RankCalls] = Field(default_factory=dict)
    calls_requested: int = 0  # calls served by the requested backend, all ranks
    calls_total: int = 0  # calls served by any backend, all ranks
    fallbacks: int = 0
    valid: bool = False
    reasons: list[str] = Field(default_factory=list)
    backend: dict[str, Any] = Field(default_factory=dict)  # attn_calls.json's: what the backend ran


class _RunName(Record):  # declared before the attention, so results.json keeps its field order
    key: str
    path: str
    arm: str
    seed: int | str | None = None  # the sample (records.sample_label): the seed, with its input if any
    repeat: int = 1  # 1 is the run compared for accuracy; 2.. time the same computation again
    role: str = "candidate"


class RunSummary(AttentionChoice, _RunName):
    attn_type: str | None = None  # None: a bare file's (no run.json)
    plugins: list[PluginRef] = Field(default_factory=list)  # the spec's: where its backends' code came from
    code: dict[str, str] = Field(default_factory=dict)  # sha256 of each harness backend's source file
    status: str = "pending"
    reason: str | None = None
    log_tail: str = ""
    valid: bool | None = None  # attention validity (run.json, else attn_calls.json)
    invalid_reasons: list[str] = Field(default_factory=list)
    output: str | None = None  # path of output.mp4 when present
    output_sha256: str | None = None
    lossless: str | None = None  # path of output_lossless.mkv when the run wrote one
    lossless_sha256: str | None = None
    emulated: bool | None = None  # run.json's word: a numerics model, not a kernel (None: not recorded)
    load: MachineLoad | None = None  # run.json's: the machine around the run (None: not recorded)
    dit_steps: int | None = None
    step_seconds: list[float] = Field(default_factory=list)
    s_per_step: float | None = None
    pipeline_total_s: float | None = None
    wall_total_s: float | None = None
    stages: dict[str, float] = Field(default_factory=dict)
    timing_source: str | None = None
    timing_missing: list[str] = Field(default_factory=list)
    attn: AttnSummary | None = None
    layers: LayerTiming | None = None  # layers.json: a run that timed its DiT blocks
    stats: RunStats | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.ok.value

    def step(self, index: int) -> float | None:
        """Seconds of DiT step ``index`` (1-based)."""
        return self.step_seconds[index - 1] if 0 < index <= len(self.step_seconds) else None

    @property
    def label(self) -> str:
        return self.key


# Global statistics that describe a typical value (judged by the verdicts) and extremes (shown only).
JUDGED_STATS = tuple(
    "luma_mean luma_std sharpness motion black_frames frozen_frames nan_like_frames audio_rms".split()
)
SHOWN_STATS = ("audio_peak",)


def stat_fields(stats: RunStats | None) -> dict[str, float | None]:
    """The statistics shown and checked (of the content, not the container)."""
    values = {n: getattr(stats, n, None) for n in (*JUDGED_STATS, *SHOWN_STATS)}
    return {n: None if v is None else float(v) for n, v in values.items()}


def _log_tail(run: RunDir, recorded: str) -> str:
    if recorded.strip():
        return "\n".join(recorded.splitlines()[-LOG_TAIL_LINES:])
    parts = [tail_text(run.file(name), LOG_TAIL_LINES) for name in (STDERR_LOG, STDOUT_LOG)]
    return next((p for p in parts if p.strip()), "")


def _side_file(read: Callable[[], T | None], name: str, notes: list[str]) -> T | None:
    """A run's side file (timing.json, attn_calls.json), or None with a note when it is unreadable."""
    try:
        return read()
    except HarnessError as err:
        notes.append(f"{name} unreadable: {err}")
        return None


def summarize_run(
    run: RunDir, arm_status: ArmStatus | None = None, *, hashes: FileHashes | None = None
) -> RunSummary:
    """A run's own account of itself; ``hashes``: the output hashes' memo (default: the process's)."""
    hashes = hashes or PROCESS_HASHES
    notes: list[str] = []
    rec = None
    damaged = None
    if run.exists():
        try:
            rec = run.record()
        except HarnessError as err:
            if arm_status is None:
                raise
            damaged = str(err)  # the campaign's arm list still says what this run was
    if rec is None and arm_status is None:
        raise HarnessError(f"{run.path}: not a run directory (no run.json inside)")
    # One account from run.json's spec, or (run.json missing or unreadable) the campaign's arm line.
    src: Any = rec.spec if rec is not None else arm_status
    s = RunSummary(
        key=run.key if rec is not None else src.key,
        path=str(run.path),
        **{k: getattr(src, k) for k in ("arm", "repeat", "role")},
        seed=sample_label(src.seed, src.input),
        **AttentionChoice.of(src).model_dump(),
        plugins=list(getattr(src, "plugins", [])),
        code=dict(getattr(src, "code", {})),
    )
    if rec is None:
        s.status = "damaged" if damaged else arm_status.status.value
        s.reason = (
            f"run.json unreadable: {damaged}" if damaged else arm_status.reason
        ) or "no run.json was written"
        s.valid = None if damaged else arm_status.valid
        s.log_tail = _log_tail(run, "")
        return s
    s.status, s.reason, s.valid = rec.status.value, rec.reason, rec.valid
    s.invalid_reasons, s.emulated, s.load = list(rec.invalid_reasons), rec.emulated, rec.load
    if not s.ok:
        s.log_tail = _log_tail(run, rec.log_tail)

    # A run that ended ok is judged on its records only while they hold: a timing.json that is not
    # a measurement, or any file that is not the one run.json hashed, leaves it damaged (named).
    damage: list[str] = []
    for name, recorded in rec.outputs.items() if s.ok else ():
        try:  # a name that leaves the run folder is never read
            file = resolve_under(run.path, name, f"{run.run_json} outputs")
        except HarnessError:
            damage.append(f"{run.run_json}: records {name!r}, not a file of the run folder: not judged")
            continue
        now = hashes.sha256(file) if file.is_file() else recorded  # a missing file is said where it is read
        if now != recorded:
            damage.append(
                f"{file}: sha256 {now[:16]}... is not the {recorded[:16]}... that {run.run_json.name} records: "
                "the file was changed or replaced after the run, not judged"
            )
    timing = _side_file(run.timing, "timing.json", damage if s.ok else notes)
    if timing is not None:
        for name in ("dit_steps", "s_per_step", "pipeline_total_s", "wall_total_s"):
            setattr(s, name, getattr(timing, name))
        s.step_seconds, s.stages = timing.step_seconds(), dict(timing.stages)
        s.timing_source, s.timing_missing = timing.source, list(timing.missing)
    elif s.ok:
        notes.append("no timing.json")

    s.layers = _side_file(run.layers, "layers.json", notes)
    calls = _side_file(run.attn_calls, "attn_calls.json", notes)
    if calls is not None:
        valid, reasons = calls.validity()
        s.attn = AttnSummary(
            **{k: getattr(calls, k) for k in ("requested", "kv_reversed", "ranks", "backend")},
            calls_requested=calls.total(),
            calls_total=sum(sum(r.calls.values()) for r in calls.ranks.values()),
            fallbacks=calls.total_fallbacks(),
            valid=valid,
            reasons=reasons,
        )
        if s.valid is None:
            s.valid, s.invalid_reasons = valid, reasons
    elif s.ok:
        notes.append("no attn_calls.json: attention calls were not recorded")

    if run.output.is_file() and run.output.stat().st_size > 0:
        s.output = str(run.output)
        s.output_sha256 = hashes.sha256(run.output)
    elif s.ok:
        notes.append("no output.mp4")
    lossless = run.file(OUTPUT_LOSSLESS)
    if s.ok and lossless.is_file() and lossless.stat().st_size > 0:
        s.lossless, s.lossless_sha256 = str(lossless), hashes.sha256(lossless)
    s.notes = notes
    if s.ok and damage:
        s.status, s.reason = "damaged", "; ".join(damage)
    return s
