"""Records written to disk by every stage: one pydantic model per file kind (unknown fields
ignored, infinities as "Infinity", written atomically by ``store.write_record``) and its schema id
(``"schema": "harness.run/1"``), checked on every read: another kind or version is refused in one
line (no older version is migrated). The times a record carries are held to the rules ingest
holds a LightX2V log to: not finite, negative, zero or beyond any real run is no measurement."""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from harness.errors import HarnessError
from harness.run_keys import run_key

MAX_DIT_STEPS = 10_000  # production schedules have tens of steps
MAX_SECONDS = 1e6  # 11.6 days: no step, stage or pipeline of a run lasts longer


def positive_seconds(value: float, zero: bool = False) -> float:
    """A step or a total: finite, above zero (zero is no measurement), at most ``MAX_SECONDS``; with
    ``zero``, a stage total (a stage may take no time)."""
    if not math.isfinite(value):
        raise ValueError(f"{value} seconds: not a finite number")
    if value > MAX_SECONDS:
        raise ValueError(f"{value:g} seconds: above {MAX_SECONDS:g} s, no run lasts that long")
    if value < 0 or (value == 0 and not zero):
        raise ValueError(f"{value} seconds: {'negative' if value < 0 else 'zero is no measurement'}")
    return value


def stage_seconds(value: float) -> float:
    return positive_seconds(value, zero=True)


def step_index(value: int) -> int:
    if not 1 <= value <= MAX_DIT_STEPS:
        raise ValueError(f"step {value}: DiT steps count from 1 to at most {MAX_DIT_STEPS}")
    return value


def step_count(steps: Any) -> Any:
    """At most ``MAX_DIT_STEPS`` steps, counted before any is read (one line, not one per step)."""
    if isinstance(steps, list) and len(steps) > MAX_DIT_STEPS:
        raise ValueError(f"{len(steps)} steps: more than {MAX_DIT_STEPS}, no schedule has that many")
    return steps


def distinct_steps(steps: list[Any]) -> list[Any]:
    seen: set[int] = set()
    for s in steps:
        if s.index in seen:
            raise ValueError(f"step {s.index} timed twice")
        seen.add(s.index)
    return steps


PositiveSeconds = Annotated[float, AfterValidator(positive_seconds)]
StageSeconds = Annotated[float, AfterValidator(stage_seconds)]
StepIndex = Annotated[int, AfterValidator(step_index)]


class Record(BaseModel):
    """Base of every model the harness writes: unknown fields ignored, infinities as strings."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, ser_json_inf_nan="strings")


class SchemaMismatch(HarnessError):
    """A record file of a schema version this harness does not read (damaged, as far as a reader goes)."""


_SCHEMA_ID = re.compile(r"^(?P<kind>[A-Za-z0-9_.-]+)/(?P<version>[0-9]+)$")


def schema_id(model: type[BaseModel]) -> str | None:
    """The schema id a model writes (``harness.run/1``), or None for a model that has none."""
    field = model.model_fields.get("schema_version")
    return field.default if field is not None and isinstance(field.default, str) else None


def parse_schema_id(value: str) -> tuple[str, int] | None:
    """("harness.run", 1) from "harness.run/1"; None when it is not of that form."""
    m = _SCHEMA_ID.match(value) if isinstance(value, str) else None
    return (m["kind"], int(m["version"])) if m else None


def check_schema(
    data: Any, model: type[BaseModel], source: str, older: str = "read it with the harness that wrote it"
) -> None:
    """Refuse ``data`` unless its schema id is the one ``model`` writes (one line naming ``source``
    and both ids); data or a model without a schema id passes (the model's validation judges it)."""
    current = schema_id(model)
    if current is None or not isinstance(data, dict) or "schema" not in data:
        return
    given = data["schema"]
    kind, version = parse_schema_id(current) or (current, 0)
    parsed = parse_schema_id(given)
    if parsed is None:
        raise SchemaMismatch(f"{source}: schema {given!r} is not a schema id (this harness reads {current})")
    if parsed[0] != kind:
        raise SchemaMismatch(
            f"{source}: schema {given} is not a {kind} record (this harness reads {current})"
        )
    if parsed[1] != version:
        age, what = ("newer", "read it with a newer harness") if parsed[1] > version else ("older", older)
        raise SchemaMismatch(f"{source}: schema {given} is {age} than this harness reads ({current}); {what}")


class Role(str, Enum):
    reference = "reference"
    noise_floor = "noise_floor"
    candidate = "candidate"


def steady_steps(seconds: list[float]) -> list[float]:
    """DiT steps 2..N (step 1 carries warm-up), or step 1 alone: s/step and every speed test's samples."""
    return list(seconds[1:] if len(seconds) > 1 else seconds)


def role_rank(role: Role | str) -> int:
    """Sort key of a role: the reference first, then the noise floor, then candidates."""
    return {"reference": 0, "noise_floor": 1, "candidate": 2}.get(getattr(role, "value", role), 3)


class RunStatus(str, Enum):
    pending = "pending"
    running = "running"
    ok = "ok"
    failed = "failed"  # the runner exited non-zero or raised
    timeout = "timeout"
    interrupted = "interrupted"  # Ctrl-C / SIGTERM while running
    skipped = "skipped"  # not run: backend unavailable here, pre-flight refused, ...


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file, read in chunks (an mp4 is never held whole)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


class PluginRef(Record):
    """Code a scenario brings in (``plugins:`` or an installed ``harness.plugins`` entry point): where
    a run's attention code came from, and its digest."""

    ref: str  # as the scenario writes it: a file (relative to the scenario) or a module name
    path: str  # the file imported (a package: its __init__.py)
    module: str | None = None  # the module name, when the plugin is a module and not a file
    sha256: str  # of the file at planning time; a changed file is a new spec (its arms run again)
    registers: list[str] = Field(default_factory=list)  # "attention backend fp16_chunked", ...


def canonical_hash(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class AttentionChoice(Record):
    """The attention an arm runs: a backend, its options and an exact perturbation. The records that
    carry it (arm, ``RunSpec``, ``ShadowSpec``, ``RunSummary``) inherit it, so their JSON stays flat."""

    attn_type: str
    kv_reversed: bool = Field(False, description="Reverse K/V token order before the call (noise floor).")
    kv_chunks: int = Field(
        1,
        ge=1,
        description="Split K/V into this many chunks along the sequence and merge the chunks' outputs "
        "by log-sum-exp (online softmax): exact, only rounding changes (a noise floor).",
    )
    attn_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the attention backend (e.g. {sdpa_backend: efficient} for another exact "
        "SDPA kernel as a noise floor; `harness backends` lists what each backend runs).",
    )

    @classmethod
    def of(cls, x: Any) -> AttentionChoice:
        """A copy of the attention of ``x`` (a record or a dict; other fields ignored)."""
        fields = AttentionChoice.model_fields
        data = x if isinstance(x, dict) else {n: getattr(x, n) for n in fields if hasattr(x, n)}
        return AttentionChoice.model_validate({n: v for n, v in data.items() if n in fields})

    def choice(self) -> AttentionChoice:  # this record's attention alone (a copy)
        return AttentionChoice.of(self)

    @property
    def perturbation(self) -> str:
        """How an exact run is perturbed ('K/V reversed', 'K/V in 2 chunks', 'sdpa_backend=efficient')."""
        bits = ["K/V reversed"] if self.kv_reversed else []
        if self.kv_chunks > 1:
            bits.append(f"K/V in {self.kv_chunks} chunks")
        bits += [f"{k}={v}" for k, v in sorted(self.attn_options.items())]
        return ", ".join(bits)

    def timing_notes(self, noise_floor: bool = False) -> list[str]:
        """Why a run of this attention times more than its backend (each perturbation wrapper's work)."""
        notes = ["the K/V-reversed wrapper copies K and V (flip) before every call"] * self.kv_reversed
        if self.kv_chunks > 1:
            notes.append("the chunked wrapper attends to each K/V chunk and adds an fp32 log-sum-exp pass")
        if noise_floor and self.attn_options and not notes:
            notes.append("another exact kernel, run as a noise floor")
        return notes

    def harness_only(self, who: str) -> tuple[str, str] | None:
        """(field, one line) for the first field set here that only the harness's attention chain serves."""
        if self.kv_chunks > 1:
            name, why = "kv_chunks", "K/V chunks merged by log-sum-exp weights"
        elif self.attn_options:
            name, why = "attn_options", "options of the backend itself"
        else:
            return None
        return (
            name,
            f"{name} needs a harness backend run by the harness ({why}); {who} takes none (it applies kv_reversed alone)",
        )


class _ShadowName(Record):  # declared before the attention, so a shadow's JSON keeps its field order
    name: str  # the label its errors go under: the arm it stands for, or the backend's name


class ShadowSpec(AttentionChoice, _ShadowName):
    """One op computed beside every attention call of a shadowed run, on copies of the same q/k/v."""


class CaptureSettings(Record):
    """Which calls of a shadowed run keep their q/k/v for ``harness kernels``: steps from 1 (-1: the
    last), one call per (step, block, kind), at most ``max_calls`` per rank and ``max_mb`` MB."""

    steps: list[int] = Field(default_factory=lambda: [1, -1])
    blocks: list[int] = Field(default_factory=lambda: [0])
    kinds: list[Literal["dit_self", "refiner", "cross", "other"]] | None = None  # None: every kind
    heads: int | None = Field(None, ge=1, description="Keep the first this many heads (all: None).")
    max_calls: int = Field(4, ge=1)
    max_mb: float = Field(512.0, gt=0)


class InSituSettings(Record):
    """How a shadowed run measures: ``sample_rows`` rows of every call against exact attention."""

    sample_rows: int = Field(256, ge=1)
    seed: int = Field(0, ge=0)
    yardstick: Literal["float32", "float64"] = "float32"
    capture: CaptureSettings | None = None


class StepSchedule(Record):
    """Route attention by DiT step (from 1): the ``exact`` backend on the first and last steps and
    ``exact_steps``, the arm's own backend on every other step."""

    exact: str = "torch_sdpa"
    exact_options: dict[str, Any] = Field(default_factory=dict)
    exact_first: int = Field(0, ge=0)
    exact_last: int = Field(0, ge=0)
    exact_steps: list[int] = Field(default_factory=list)


class _RunPlace(Record):  # declared before the attention, so run.json keeps its field order
    scenario: str
    runner: str
    arm: str
    seed: int
    profile: str | None = None


class RunSpec(AttentionChoice, _RunPlace):
    """Everything that determines what one arm run computes (hashed for resume)."""

    role: Role = Role.candidate
    params: dict[str, Any] = Field(default_factory=dict)  # after profile and arm overrides
    env: dict[str, str] = Field(default_factory=dict)  # what the scenario and arm set
    timeout_s: float | None = None
    multi_seed: bool = False  # whether the run directory carries @seed (always with an input)
    repeat: int = 1  # 1-based; repeats 2.. time the same computation again in a new process
    # In-situ measurement (ops computed beside every call; output unchanged) and a step schedule.
    shadows: list[ShadowSpec] = Field(default_factory=list)
    insitu: InSituSettings | None = None
    schedule: StepSchedule | None = None
    # Plugins imported in the run's process; sha256 of each harness backend's source it calls.
    plugins: list[PluginRef] = Field(default_factory=list)
    code: dict[str, str] = Field(default_factory=dict)
    # the scenario's input this run generates from (None: it lists none, and run.json says nothing)
    input: str | None = Field(None, exclude_if=lambda v: v is None)

    @property
    def key(self) -> str:
        seed = self.seed if self.multi_seed or self.input is not None else None
        return run_key(self.arm, seed, self.repeat, self.input)

    def spec_hash(self) -> str:
        """Hash of what the run computes (not the repeat; of the plugins its process imports, their
        digests, not where they lie); fields at defaults older harnesses did not write are left out."""
        data = self.model_dump(mode="json", exclude={"timeout_s", "repeat", "plugins"})
        data["plugins"] = sorted(p.sha256 for p in self.plugins)
        added = {"plugins", "kv_chunks", "attn_options", "shadows", "insitu", "schedule", "code"}
        at_default = {
            k for k in added if data[k] == RunSpec.model_fields[k].get_default(call_default_factory=True)
        }
        return canonical_hash({k: v for k, v in data.items() if k not in at_default})


BUSY_SHARE = 0.25  # other processes' CPU, as a share of the cores, that makes a run's timings noisy
BUSY_GPU_PERCENT = 50.0  # the GPU's utilisation just before the run: another process computing on it


class MachineLoad(Record):
    """The machine around one run, sampled at its start and its end (run.json's ``load``)."""

    cpu_count: int = Field(ge=1)
    loadavg_1m: list[float] = Field(default_factory=list)  # at the start, at the end (the run's in it)
    # other processes' CPU over the run, % of all cores: /proc/stat less the run's tree (None: no /proc)
    other_cpu_percent: float | None = None
    gpu_util_percent: float | None = None  # just before the run (after: the run's own); None: no GPU

    def busy(self) -> str | None:
        """What made the machine busy (a phrase), or None: others' CPU where measured, else the load."""
        if self.other_cpu_percent is not None and self.other_cpu_percent >= 100 * BUSY_SHARE:
            used = self.other_cpu_percent * self.cpu_count / 100
            return f"other processes used {used:.1f} of {self.cpu_count} cores"
        if self.other_cpu_percent is None and self.loadavg_1m and self.loadavg_1m[0] > self.cpu_count:
            return f"load {self.loadavg_1m[0]:.1f} on {self.cpu_count} cores"
        if self.gpu_util_percent is not None and self.gpu_util_percent >= BUSY_GPU_PERCENT:
            return f"the GPU {self.gpu_util_percent:.0f} % busy before the run"
        return None


class RunRecord(Record):
    """run.json: the spec, what was executed and how it ended."""

    schema_version: str = Field("harness.run/1", alias="schema")
    spec: RunSpec
    spec_hash: str
    status: RunStatus = RunStatus.pending
    reason: str | None = None  # one line: why skipped/failed/invalid
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    exit_code: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    log_tail: str = ""
    outputs: dict[str, str] = Field(default_factory=dict)  # relative path -> sha256
    valid: bool | None = None  # attention validity: False when the backend served no call or one fell back
    invalid_reasons: list[str] = Field(default_factory=list)
    host: str | None = None
    # The process group that ran the runner (its guard's pid) and that process's start time in
    # clock ticks since boot: a later harness tells a live runner from a reused pid by both.
    pid: int | None = None
    pid_start: int | None = None
    gpu: str | None = None
    job_id: str | None = None
    executor: str = "local"
    emulated: bool | None = None  # the backend is a numerics model (the registry's word; None: not recorded)
    load: MachineLoad | None = None  # the machine around the run (None: not recorded, older records)
    logs_cut: dict[str, int] = Field(default_factory=dict)  # log name -> bytes its cap cut from it


def stale_reason(rec: RunRecord) -> str | None:
    """Why a local run.json still pending/running was left by a harness that is gone (one line); ask
    it holding the campaign lock. Slurm jobs outlive the harness on purpose (re-attached)."""
    if rec.status not in (RunStatus.pending, RunStatus.running) or rec.executor != "local":
        return None
    where = f"pid {rec.pid} on {rec.host}" if rec.pid else f"on {rec.host or 'an unknown host'}"
    return f"interrupted (stale): left {rec.status.value} by a harness run that is gone (runner {where})"


class StepTiming(Record):
    index: StepIndex  # 1-based DiT step
    seconds: PositiveSeconds  # max over ranks when there are ranks (the step ends when the slowest ends)
    per_rank: dict[str, PositiveSeconds] = Field(default_factory=dict)


class TimingRecord(Record):
    """timing.json, builtin and LightX2V alike; times held to ingest's rules (``positive_seconds``)."""

    schema_version: str = Field("harness.timing/1", alias="schema")
    source: str  # "builtin" | "lightx2v-log"
    steps: Annotated[list[StepTiming], BeforeValidator(step_count), AfterValidator(distinct_steps)] = Field(
        default_factory=list
    )
    # Stage totals in seconds: text_encoder, dit, vae_decode, save, load, ...
    stages: dict[str, StageSeconds] = Field(default_factory=dict)
    pipeline_total_s: PositiveSeconds | None = None  # request total, model load excluded
    wall_total_s: PositiveSeconds | None = None  # process total, model load included
    seq_len: int | None = None  # attention sequence length (packed tokens)
    packed_layout: dict[str, int] | None = None  # text/audio/video/total token counts
    ranks: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)  # what the source did not say

    @property
    def dit_steps(self) -> int:
        return len(self.steps)

    def step_seconds(self) -> list[float]:
        return [s.seconds for s in sorted(self.steps, key=lambda s: s.index)]

    @property
    def s_per_step(self) -> float | None:  # mean of the steady steps (``steady_steps``)
        sec = self.step_seconds()
        return statistics.fmean(steady_steps(sec)) if sec else None


class DirectCheck(Record):
    """A run's first attention call against its op called directly: does the backend pass it through?"""

    q_shape: list[int] = Field(default_factory=list)  # [B, H, N, D] of the checked call
    identical: bool
    max_abs_diff: float = 0.0
    # When they differ: True, the op repeats itself (the backend changes it); False, it does not.
    op_repeatable: bool | None = None
    inputs_modified: list[str] = Field(default_factory=list)  # of q, k, v: changed in place by the call
    note: str = ""
    step: int | None = None  # the DiT step it ran in (a schedule's candidate: an exact step, on copies)

    def reading(self) -> str:
        where = f"first call, q {'x'.join(map(str, self.q_shape))}" if self.q_shape else "first call"
        changed = " and ".join(self.inputs_modified)
        written = f"; the call changes {changed} in place" if changed else ""
        if self.identical:
            return f"bitwise identical{written} ({where})"
        if self.note:
            return f"differs: {self.note}{written} ({where})"
        cause = {True: "the backend changes the result", False: "the op itself is not deterministic"}
        tail = f"; {cause[self.op_repeatable]}" if self.op_repeatable is not None else ""
        return f"differs by up to {self.max_abs_diff:.3g}{tail}{written} ({where})"


class RankCalls(Record):
    calls: dict[str, int] = Field(default_factory=dict)  # backend name -> calls served
    fallbacks: dict[str, int] = Field(default_factory=dict)  # backend fallen back to -> count
    errors: list[str] = Field(default_factory=list)
    direct_check: DirectCheck | None = None  # None: not checked (no direct op, or not this runner)
    # DiT step (from 1; "-" outside any step) -> backend -> calls served: what a schedule routed where.
    per_step: dict[str, dict[str, int]] = Field(default_factory=dict)


class AttnCallsRecord(Record):
    """attn_calls.json: attention calls per rank."""

    schema_version: str = Field("harness.attn_calls/1", alias="schema")
    requested: str
    kv_reversed: bool = False
    ranks: dict[str, RankCalls] = Field(default_factory=dict)
    # The requested backend's params as it ran (kernel function and version, emulator provenance).
    backend: dict[str, Any] = Field(default_factory=dict)

    def total(self) -> int:
        return sum(r.calls.get(self.requested, 0) for r in self.ranks.values())

    def total_fallbacks(self) -> int:
        return sum(n for r in self.ranks.values() for n in r.fallbacks.values())

    def validity(self) -> tuple[bool, list[str]]:
        """Valid: the requested backend served every rank, nothing fell back, no rank erred."""
        reasons = [] if self.ranks else ["no attention calls were recorded"]
        for rank, rc in sorted(self.ranks.items()):
            if rc.calls.get(self.requested, 0) == 0:
                reasons.append(f"rank {rank}: requested backend {self.requested!r} served no call")
            for other, n in sorted(rc.fallbacks.items()):
                if n:
                    reasons.append(f"rank {rank}: {n} call(s) fell back to {other!r}")
            reasons.extend(f"rank {rank}: {e}" for e in rc.errors)
        return (not reasons), reasons
