"""The scenario core (runner, seeds, profiles, environment, arms with one reference): the fields
every scenario has, their rules, and the model composed with its runner's or kind's ``ScenarioPart``."""

from __future__ import annotations

import collections
import re
import typing
from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    StringConstraints,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from harness.errors import ScenarioError
from harness.records import AttentionChoice, PluginRef, Role
from harness.registry import EXECUTORS, RUNNER_SCENARIO, RUNNERS, SCENARIO_KINDS, did_you_mean
from harness.scenario.dose import DoseResponseBlock, DoseResponseSource, with_dose_arms
from harness.scenario.insitu import InSituBlock, InSituTolerance, ScheduleBlock, check_insitu
from harness.scenario.parts import NO_PART, FieldProblem, ScenarioPart, deep_merge
from harness.scenario.verdict import VerdictRules

# Scenario, profile, campaign and arm names become folder names: one safe pattern for all of them.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
# An attention type is never a folder name; diffusers' dispatcher names may start with '_'.
ATTN_TYPE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"
ATTN_TYPE_RULE = (
    "letters, digits, '_', '.' and '-', starting with a letter, a digit or '_', at most 100 characters"
)
NAME_RULE = "letters, digits, '_', '.' and '-', starting with a letter or digit, at most 100 characters"
PATTERN_RULES = {NAME_PATTERN: NAME_RULE, ATTN_TYPE_PATTERN: ATTN_TYPE_RULE}  # what a mismatch says
SafeName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
SEED_LIMIT = 2**32
# A seed is a plain integer in [0, 2^32): not a string, a float or a bool.
Seed = Annotated[StrictInt, Field(ge=0, lt=SEED_LIMIT)]
EnvValue = str | int | float | bool


def check_name(value: str, what: str) -> str:
    """``value`` if it is a safe name (a folder name that stays where it is put); else a one-line error."""
    if not isinstance(value, str) or not re.fullmatch(NAME_PATTERN, value):
        raise ScenarioError(f"{what}: {value!r} is not a valid name ({NAME_RULE})")
    return value


def check_seed(value: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise ScenarioError(f"{what}: seed {value!r} is not an integer in [0, 2^32)")


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``loc`` (to list the keys that were expected)."""
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None
        model = _inner_model(model.model_fields[part].annotation)
    return model


def _inner_model(tp: Any) -> type[BaseModel] | None:
    """The pydantic model ``tp`` is, or holds (in a union, a list or a dict's values)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    return next(filter(None, map(_inner_model, typing.get_args(tp))), None)


def describe_error(root: type[BaseModel], err: dict) -> str:
    """One pydantic error of a model rooted at ``root``, as a scenario's one line says it."""
    loc, kind, msg = tuple(err["loc"]), err["type"], err["msg"]
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        allowed = list(parent.model_fields) if parent else []
        tip = did_you_mean(str(loc[-1]), allowed)
        return f"unknown key{tip} (expected one of: {', '.join(allowed)})" if allowed else "unknown key"
    if kind == "missing":
        return "required field is missing"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    got = err.get("input")
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") in PATTERN_RULES:
        return f"{got!r} is not a valid name ({PATTERN_RULES[err['ctx']['pattern']]})"
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return f"{msg} (got {shown})"


E2E = "e2e"  # the kind the core itself is: arms run by a runner


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ATTN_TYPE = Field(
    pattern=ATTN_TYPE_PATTERN,
    description="Attention backend: for the builtin runner a name from `harness backends`; for "
    "lightx2v one of LightX2V's attention types (checked by its pre-flight probe).",
)


class _ArmHead(Strict):  # declared before the attention, so an arm's fields keep their order
    name: str = Field(pattern=NAME_PATTERN, description="Run directory name; unique in the scenario.")
    attn_type: str = ATTN_TYPE
    role: Role = Field(Role.candidate, description="reference (exactly one), noise_floor or candidate.")


class Arm(AttentionChoice, _ArmHead):
    """One attention configuration to run (the fields every runner's arms have): the attention it
    runs (``AttentionChoice``: backend, options, exact perturbation) and how the arm runs it."""

    # A scenario's strictness, not the record's leniency it would inherit.
    model_config = ConfigDict(
        extra="forbid", populate_by_name=False, validate_by_name=False, ser_json_inf_nan="null"
    )

    attn_type: str = ATTN_TYPE  # the choice's, held to the scenario's pattern
    repeats: int | None = Field(
        None, ge=1, description="Runs of this arm per seed (default: the scenario's repeats)."
    )
    env: dict[str, EnvValue] = Field(default_factory=dict, description="Extra environment for this arm.")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Runner parameters for this arm only."
    )
    description: str | None = None
    shadows: list[Annotated[str, StringConstraints(pattern=ATTN_TYPE_PATTERN)]] = Field(
        default_factory=list,
        description="In-situ measurement: arms (by name) or attention backends also computed on every "
        "attention call of this arm, on copies of the same q/k/v; the arm's own output is unchanged. Put "
        "them on a copy of the reference, not on the reference: a shadowed run is never a timing baseline.",
    )
    insitu: InSituBlock | None = Field(
        None, description="How the shadows are measured (default with shadows: 256 rows, seed 0, fp32)."
    )
    schedule: ScheduleBlock | None = Field(
        None,
        description="Hybrid schedule: exact attention on chosen DiT steps (from 1), this backend between.",
    )


class SlurmBlock(Strict):
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    time_min: int = Field(60, ge=1, description="Job time limit in minutes.")
    gpus_per_node: int | None = Field(None, ge=0, description="Default: the runner's GPU count.")
    cpus_per_task: int | None = Field(None, ge=1)
    mem_gb: int | None = Field(None, ge=1)
    exclusive: bool = Field(True, description="Whole node per arm, so timings are not shared.")
    folder: str | None = Field(None, description="submitit log folder (default: <campaign>/slurm).")
    poll_s: float = Field(5.0, gt=0)
    extra: dict[str, Any] = Field(default_factory=dict, description="Other submitit slurm_* parameters.")


class ExecutorBlock(Strict):
    kind: str = Field("local", description="Where the arms run: an executor's name (local, slurm).")
    slurm: SlurmBlock = Field(default_factory=SlurmBlock)

    @field_validator("kind")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in EXECUTORS:
            raise ValueError(EXECUTORS.unknown_message(v))
        return v


class RepeatsAuto(Strict):
    """``repeats: auto``: interleaved rounds until every candidate's speed-up interval is narrow enough."""

    target: float = Field(
        0.02,
        gt=0,
        description="Stop when every candidate's speed-up interval is narrower than this fraction.",
    )
    min: int = Field(2, ge=2, description="Rounds run before the first look (2: an interval needs two).")
    max: int = Field(10, ge=2, description="Rounds at most, whatever the intervals.")

    @model_validator(mode="after")
    def _ordered(self) -> RepeatsAuto:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be at least min ({self.min})")
        return self


class ReportBlock(Strict):
    single_file: bool = Field(
        False, description="index.html with every image inlined (one file), not beside an assets/ folder."
    )


def kind_names() -> list[str]:
    return [E2E, *SCENARIO_KINDS.names()]


def unknown_kind(kind: str) -> str:
    known = kind_names()
    return f"unknown scenario kind {kind!r}{did_you_mean(kind, known)} (known: {', '.join(known)})"


class Scenario(Strict):
    """A scenario; a scenario file is validated by the model ``scenario_model`` composes for it."""

    # The parts this model was composed with (the core alone: none).
    runner_part: ClassVar[ScenarioPart] = NO_PART
    kind_part: ClassVar[ScenarioPart] = NO_PART

    name: str = Field(pattern=NAME_PATTERN)
    kind: str = Field(E2E, description="e2e (arms run by a runner), or a registered kind such as kernels.")
    description: str | None = None
    plugins: list[str] = Field(
        default_factory=list,
        description="Python files (relative to the scenario file) or module names imported before the "
        "scenario is checked and in the process of every arm that calls what they register: they register "
        "attention backends (a kernel of your own), and may not change torch, the environment or the random "
        "state. Importing runs them with your rights: a scenario is code, like a Makefile.",
    )
    sources: list[str] = Field(
        default_factory=list,
        description="More code a plugin's kernel runs, in its code digest: files or folders (relative to "
        "the scenario file) and installed packages (pkg:NAME, by version and RECORD).",
    )
    runner: str | None = Field(None, description="The runner of every arm (builtin, lightx2v, ...).")
    seed: Seed | None = Field(None, description="The seed of every arm, an integer in [0, 2^32).")
    seeds: list[Seed] | None = Field(None, description="Several seeds: every arm runs once per seed.")
    inputs: dict[SafeName, dict[str, Any]] | None = Field(
        None,
        description="Several inputs (prompt, images, audio, lengths): by name, the fields of the runner's "
        "block each one changes ({} keeps the block as written; a mapping such as builtin's params is "
        "merged key by key). Every arm runs once per input and seed; the verdict pairs runs by (input, "
        "seed) and names the deciding one (a single input is applied and named nowhere, as one seed).",
    )
    env: dict[str, EnvValue] = Field(default_factory=dict)
    profiles: dict[SafeName, dict[str, Any]] = Field(
        default_factory=dict, description="Runner parameters by profile name (selected with --profile)."
    )
    default_profile: SafeName | None = None
    arms: list[Arm] = Field(default_factory=list)
    timeout_s: float | None = Field(None, gt=0, description="Per-arm time limit in seconds.")
    repeats: int | Literal["auto"] = Field(
        1,
        description="Runs of each arm per seed, each in its own process, in interleaved rounds "
        "each in the reverse order of the one before (A B C, C B A, ...): the samples of the speed tests; 'auto': rounds until every candidate's speed-up "
        "interval is narrower than repeats_auto.target, or repeats_auto.max rounds.",
    )
    repeats_auto: RepeatsAuto = Field(default_factory=RepeatsAuto)
    verdict: VerdictRules = Field(default_factory=VerdictRules)
    executor: ExecutorBlock = Field(default_factory=ExecutorBlock)
    report: ReportBlock | None = None
    accepted_baseline: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description="The arm (or shadow) candidates are also read against, in situ and end to end (as "
        "verdict.accepted_baseline, which names the same one), e.g. sage_attn2 (thu-ml SageAttention).",
    )
    insitu_tolerance: InSituTolerance = Field(default_factory=InSituTolerance)
    dose_response: DoseResponseBlock | None = Field(
        None,
        description="A dose-response: one candidate arm per (shape, dose) added to the arms, each "
        "running exact attention with a planted per-call error of that rel L1; the analysis reads the "
        "largest dose whose end-to-end error stays within the tolerance (docs/verdicts.md).",
    )
    dose_response_from: DoseResponseSource | None = Field(
        None,
        description="A dose-response measured before (its results.json and sha256): each in-situ candidate's "
        "per-call error is read on its curves (the end-to-end error it predicts, beside the measured one).",
    )
    # What the loader imported for `plugins:` and the installed entry points (set by the loader).
    _plugin_refs: list[PluginRef] = PrivateAttr(default_factory=list)
    _sources_digest: str = PrivateAttr("")  # of `sources:` (set by the loader)

    @property
    def plugin_refs(self) -> list[PluginRef]:
        return list(self._plugin_refs)

    @model_validator(mode="before")
    @classmethod
    def _dose_arms(cls, data: Any) -> Any:
        return with_dose_arms(data)

    @field_validator("env")
    @classmethod
    def _env_str(cls, v: dict[str, EnvValue]) -> dict[str, EnvValue]:
        return {k: (("1" if x else "0") if isinstance(x, bool) else str(x)) for k, x in v.items()}

    @field_validator("repeats")
    @classmethod
    def _repeats(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError("repeats must be 1 or more, or 'auto'")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.kind != E2E:
            self._require_block(type(self).kind_part, f"kind {self.kind!r}")
            return self._checked(type(self).kind_part)
        if self.runner is None:
            raise ValueError(f"'runner' is required (one of: {', '.join(RUNNERS.names())})")
        if self.seed is not None and self.seeds is not None:
            raise ValueError("give 'seed' or 'seeds', not both")
        if self.seeds is not None and (not self.seeds or len(set(self.seeds)) != len(self.seeds)):
            raise ValueError("'seeds' must be a non-empty list of distinct integers")
        if not self.arms:
            raise ValueError("'arms' must list at least one arm")
        if self.inputs is not None and not self.inputs:
            raise ValueError("'inputs' must name at least one input")
        if self.verdict.floor_log_sd and not (self.verdict.floor_log_sd_source or "").strip():
            raise ValueError(  # a stated spread is a measurement: the verdict names where it was made
                "verdict.floor_log_sd_source is required with verdict.floor_log_sd: say where that spread was "
                "measured (it is printed beside every reading that uses it)"
            )
        # linear: a scenario may list 100,000 arms
        if dups := sorted(n for n, k in collections.Counter(a.name for a in self.arms).items() if k > 1):
            raise ValueError(f"arm names must be unique; repeated: {', '.join(dups)}")
        refs = [a.name for a in self.arms if a.role == Role.reference]
        if len(refs) != 1:
            raise ValueError(f"exactly one arm must have role: reference (found {', '.join(refs) or 'none'})")
        self._require_block(type(self).runner_part, f"runner {self.runner!r}")
        for name in self.inputs or {}:
            self.for_input(name)  # each input's block is a valid block: a FieldProblem names its field
        check_insitu(self, type(self).runner_part.insitu)  # a FieldProblem, like a runner's check
        if self.default_profile is not None and self.default_profile not in self.profiles:
            raise ValueError(f"default_profile {self.default_profile!r} is not one of the profiles")
        return self._checked(type(self).runner_part)

    def _require_block(self, part: ScenarioPart, owner: str) -> None:
        if part.required and getattr(self, part.block or "", None) is None:
            raise ValueError(f"{owner} needs a {part.block!r} block")

    def _checked(self, part: ScenarioPart) -> Scenario:
        if part.check is not None:
            part.check(self)  # a FieldProblem is not a ValueError: it reaches the loader as raised
        return self

    @property
    def input_list(self) -> list[str | None]:
        return list(self.inputs) if self.inputs else [None]

    def for_input(self, name: str | None) -> Scenario:
        """The scenario as one input sees it: its runner block with the input's fields (mappings
        merged key by key, ``deep_merge``); ``None``: the scenario itself."""
        part = type(self).runner_part
        if name is None or part.block is None:
            return self
        block = self.runner_block()
        written = block.model_dump(by_alias=True, exclude_unset=True) if block is not None else {}
        try:
            block = part.model.model_validate(deep_merge(written, self.inputs[name]))
        except ValidationError as err:
            first = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
            raise FieldProblem(("inputs", name, *first["loc"]), describe_error(part.model, first)) from None
        return self.model_copy(update={part.block: block})

    @property
    def seed_list(self) -> list[int]:
        return list(self.seeds) if self.seeds else [self.seed if self.seed is not None else 42]

    @property
    def reference(self) -> Arm:
        return next(a for a in self.arms if a.role == Role.reference)

    def arm(self, name: str) -> Arm:
        found = next((a for a in self.arms if a.name == name), None)
        if found is None:
            raise ScenarioError(
                f"scenario {self.name}: no arm named {name!r} (arms: {', '.join(self.arm_names)})"
            )
        return found

    @property
    def arm_names(self) -> list[str]:
        return [a.name for a in self.arms]

    def runner_block(self) -> BaseModel | None:
        """The block of the scenario's runner (``lightx2v:``, ``builtin:``), None when not given."""
        block = type(self).runner_part.block
        return getattr(self, block) if block else None

    def source_repos(self) -> dict[str, str]:
        """Source checkouts the runner's block names (label -> path), for the environment fingerprint."""
        part, block = type(self).runner_part, self.runner_block()
        return part.repos(block) if part.repos is not None and block is not None else {}


# --- one model per (runner, kind) ----------------------------------------------------------------


def scenario_model(runner: Any = None, kind: Any = E2E) -> type[Scenario]:
    """The model of a scenario naming ``runner`` and ``kind``: the core with their blocks and arm
    fields (an unknown name: the core alone, which then says what is wrong)."""
    known_runner = isinstance(runner, str) and runner in RUNNERS and runner in RUNNER_SCENARIO
    known_kind = isinstance(kind, str) and kind != E2E and kind in SCENARIO_KINDS
    return _composed(
        RUNNER_SCENARIO.get(runner) if known_runner else NO_PART,
        SCENARIO_KINDS.get(kind) if known_kind else NO_PART,
    )


@cache
def _composed(runner_part: ScenarioPart, kind_part: ScenarioPart) -> type[Scenario]:
    if runner_part == NO_PART and kind_part == NO_PART:
        return Scenario
    model = compose_model((runner_part,), (kind_part,))
    model.runner_part, model.kind_part = runner_part, kind_part
    return model


def compose_model(runner_parts: tuple[ScenarioPart, ...], kind_parts: tuple[ScenarioPart, ...]):
    """The core with these runners' and kinds' blocks and arm fields (all of them: the JSON schema's)."""
    fields: dict[str, Any] = {}
    extras = tuple(p.arm_fields for p in runner_parts if p.arm_fields is not None)
    if extras:  # the core's fields first, then the runner's (in the order "expected one of" lists them)
        arm = create_model("Arm", __base__=(*reversed(extras), Arm))
        fields["arms"] = (list[arm], Field(default_factory=list))
    for part in (*runner_parts, *kind_parts):
        if part.block is not None:
            fields[part.block] = (part.model | None, None)
    return create_model("Scenario", __base__=Scenario, **fields)
