"""Records written to disk by every stage: one pydantic model per file kind (unknown fields
ignored, infinities as "Infinity", written atomically by ``store.write_record``) and its schema id
(``"schema": "harness.run/1"``), checked on every read: another kind or version is refused in one
line (no older version is migrated). The times a record carries are held to the rules ingest
holds a LightX2V log to: not finite, negative, zero or beyond any real run is no measurement.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from enum import Enum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from harness.code_identity import PluginRef
from harness.errors import HarnessError

MAX_DIT_STEPS = 10_000  # production schedules have tens of steps
MAX_SECONDS = 1e6  # 11.6 days: no step, stage or pipeline of a run lasts longer
T = TypeVar("T")


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{value} seconds: not a finite number")
    if value > MAX_SECONDS:
        raise ValueError(f"{value:g} seconds: above {MAX_SECONDS:g} s, no run lasts that long")
    return value


def positive_seconds(value: float) -> float:
    """A step or a total: finite, above zero (zero is no measurement), at most ``MAX_SECONDS``."""
    _finite(value)
    if value <= 0:
        raise ValueError(f"{value} seconds: {'negative' if value < 0 else 'zero is no measurement'}")
    return value


def stage_seconds(value: float) -> float:
    """A stage total: finite, not negative (a stage may take no time), at most ``MAX_SECONDS``."""
    _finite(value)
    if value < 0:
        raise ValueError(f"{value} seconds: negative")
    return value


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
StepList = Annotated[
    list[T], BeforeValidator(step_count), AfterValidator(distinct_steps)
]  # the steps of one run


class Record(BaseModel):
    """Base of every model the harness writes: unknown fields ignored on read, infinities as strings,
    fields settable by name as well as by alias (``schema_version`` / ``schema``)."""

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
    """Refuse ``data`` (a record file's parsed JSON) unless its schema id is the one ``model`` writes:
    one line naming ``source``, both ids and what to do (``older``: for a version before this one).
    Data without a schema id, or a model without one, passes (the model's validation judges it)."""
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
    """DiT steps 2..N (step 1 carries warm-up); step 1 alone when it is the only one. The one
    rule for s/step and for the samples of every speed test."""
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


def canonical_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys, no whitespace)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class AttentionChoice(Record):
    """The attention an arm runs: a backend, its options and an exact perturbation (K/V order
    reversed; K/V in chunks merged by log-sum-exp). The records that carry it (the scenario's arm,
    ``RunSpec``, ``ShadowSpec``, ``RunSummary``) inherit it, so their JSON stays flat; a copy is
    ``x.choice()``, the ops are built from it by ``attention.wrappers.make_attention``."""

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
        """A copy of the attention of ``x``: a record carrying its fields, or a dict (others ignored)."""
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
        """Why a run of this attention times more than its backend: each perturbation wrapper's own
        work; a ``noise_floor`` run with options and no wrapper is another exact kernel."""
        notes = ["the K/V-reversed wrapper copies K and V (flip) before every call"] * self.kv_reversed
        if self.kv_chunks > 1:
            notes.append("the chunked wrapper attends to each K/V chunk and adds an fp32 log-sum-exp pass")
        if noise_floor and self.attn_options and not notes:
            notes.append("another exact kernel, run as a noise floor")
        return notes

    def harness_only(self, who: str) -> tuple[str, str] | None:
        """(field, one line) for the first field set here that only the harness's own attention chain
        serves, refused for ``who`` (LightX2V, a diffusers backend: they apply K/V reversal alone)."""
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
    """Which attention calls of a shadowed run keep their q/k/v (safetensors, for ``harness kernels``):
    steps from 1 (-1: the last step), one call per (step, block, kind) (the refiner's block 0 and
    the DiT's are two), at most ``max_calls`` per rank and ``max_mb`` MB in all (a production call
    is gigabytes: ``heads`` keeps the first heads only)."""

    steps: list[int] = Field(default_factory=lambda: [1, -1])
    blocks: list[int] = Field(default_factory=lambda: [0])
    kinds: list[Literal["dit_self", "refiner", "cross", "other"]] | None = None  # None: every kind
    heads: int | None = Field(None, ge=1, description="Keep the first this many heads (all: None).")
    max_calls: int = Field(4, ge=1)
    max_mb: float = Field(512.0, gt=0)


class InSituSettings(Record):
    """How a shadowed run measures: ``sample_rows`` query rows of every call (the same rows for
    every op of the call, drawn from ``seed``) against exact attention in ``yardstick`` precision."""

    sample_rows: int = Field(256, ge=1)
    seed: int = Field(0, ge=0)
    yardstick: Literal["float32", "float64"] = "float32"
    capture: CaptureSettings | None = None


class StepSchedule(Record):
    """Route attention by DiT step (counted from 1): the ``exact`` backend on the first
    ``exact_first`` steps, the last ``exact_last`` steps and ``exact_steps``; the arm's own
    backend on every other step (``harness.attention.schedule`` routes by it)."""

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
    # Runner parameters after profile and arm overrides are applied.
    params: dict[str, Any] = Field(default_factory=dict)
    # Environment variables the scenario and arm set for this run.
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: float | None = None
    multi_seed: bool = False  # whether the run directory carries @seed
    repeat: int = 1  # 1-based; repeats 2.. time the same computation again in a new process
    # In-situ measurement: the ops computed beside every attention call (the run's output is
    # unchanged) and how; a step schedule routing attention between this backend and an exact one.
    shadows: list[ShadowSpec] = Field(default_factory=list)
    insitu: InSituSettings | None = None
    schedule: StepSchedule | None = None
    # Code identity: the plugins imported in the run's process, and the sha256 of the source file
    # of every harness backend the run calls (by backend name), so an edited kernel runs again.
    plugins: list[PluginRef] = Field(default_factory=list)
    code: dict[str, str] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """Run directory name: ``<arm>``, ``<arm>@<seed>`` when the campaign has several seeds,
        and ``~r<n>`` after it for repeat n >= 2 (repeat 1 keeps the plain name)."""
        return run_key(self.arm, self.seed if self.multi_seed else None, self.repeat)

    def spec_hash(self) -> str:
        """Hash of what the run computes: the repeat index is in the key, not in the hash, and
        fields at their defaults that older harness versions did not write are left out, so
        campaigns made before them still resume."""
        # Not the plugins (every arm loads them) but ``code``: editing a kernel re-runs its arms only.
        data = self.model_dump(mode="json", exclude={"timeout_s", "repeat", "plugins"})
        added = {
            "kv_chunks": 1,
            "attn_options": {},
            "shadows": [],
            "insitu": None,
            "schedule": None,
            "code": {},
        }
        return canonical_hash({k: v for k, v in data.items() if k not in added or v != added[k]})


REPEAT_MARK = "~r"


def run_key(arm: str, seed: int | None = None, repeat: int = 1) -> str:
    """``arm``, ``arm@seed``, ``arm@seed~r2``: '~' is not allowed in arm names, so keys parse back."""
    key = arm if seed is None else f"{arm}@{seed}"
    return key if repeat <= 1 else f"{key}{REPEAT_MARK}{repeat}"


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


LIVE = (RunStatus.pending, RunStatus.running)


def stale_reason(rec: RunRecord) -> str | None:
    """Why a run.json that still says pending/running was left by a harness that is gone (one line).

    Only for local runs, and only to be asked by a caller that holds the campaign lock (or knows
    nobody does): Slurm jobs outlive the harness on purpose and are re-attached by their executor.
    """
    if rec.status not in LIVE or rec.executor != "local":
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
    steps: StepList[StepTiming] = Field(default_factory=list)
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
    """A run's first attention call, the backend's output against its op called directly (the
    layout adapter only): does the registered backend pass the op's result through unchanged?"""

    q_shape: list[int] = Field(default_factory=list)  # [B, H, N, D] of the checked call
    identical: bool
    max_abs_diff: float = 0.0
    # Only when they differ: the op called a second time gives its first output again (True:
    # the backend changes the result; False: the op itself is not deterministic).
    op_repeatable: bool | None = None
    inputs_modified: list[str] = Field(default_factory=list)  # of q, k, v: changed in place by the call
    note: str = ""
    step: int | None = None  # the DiT step it ran in (a schedule's candidate: an exact step, on copies)

    def reading(self) -> str:
        where = f"first call, q {'x'.join(map(str, self.q_shape))}" if self.q_shape else "first call"
        written = (
            f"; the call changes {' and '.join(self.inputs_modified)} in place"
            if self.inputs_modified
            else ""
        )
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
    # The requested backend's params as it ran: what it is (a kernel's function, package version and
    # commit; an emulator's provenance). Empty: not recorded (a framework's own backend, an older run).
    backend: dict[str, Any] = Field(default_factory=dict)

    def total(self, backend: str | None = None) -> int:
        name = backend or self.requested
        return sum(r.calls.get(name, 0) for r in self.ranks.values())

    def total_fallbacks(self) -> int:
        return sum(n for r in self.ranks.values() for n in r.fallbacks.values())

    def validity(self) -> tuple[bool, list[str]]:
        """Valid: the requested backend served calls on every rank, nothing fell back, no rank reported an error."""
        reasons = [] if self.ranks else ["no attention calls were recorded"]
        for rank, rc in sorted(self.ranks.items()):
            if rc.calls.get(self.requested, 0) == 0:
                reasons.append(f"rank {rank}: requested backend {self.requested!r} served no call")
            for other, n in sorted(rc.fallbacks.items()):
                if n:
                    reasons.append(f"rank {rank}: {n} call(s) fell back to {other!r}")
            reasons.extend(f"rank {rank}: {e}" for e in rc.errors)
        return (not reasons), reasons
