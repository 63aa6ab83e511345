"""Scenario files: the schema, loading with ${VAR} expansion, and errors that name file, line and field.

One YAML file describes one experiment: the runner, the seed(s), profiles, environment and the
arms (exactly one reference, noise floors, candidates). Unknown keys are errors, so a typo is
never silently ignored.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.compare.rules import VerdictRules
from harness.errors import ScenarioError
from harness.kernels.schema import KernelsBlock
from harness.records import Role
from harness.runners.diffusers.schema import DiffusersBlock, check_arm
from harness.runners.lightx2v.schema import LightX2VBlock, check_op_refs
from harness.strict_yaml import YamlProblem, load_yaml

SCENARIO_DIR = Path("scenarios")
# Scenario, profile, campaign and arm names become folder names: one safe pattern for all of them.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
NAME_RULE = "letters, digits, '_', '.' and '-', starting with a letter or digit, at most 100 characters"
_NAME = NAME_PATTERN
# An attention type is never a folder name; diffusers' dispatcher names may start with '_'.
ATTN_TYPE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"
ATTN_TYPE_RULE = (
    "letters, digits, '_', '.' and '-', starting with a letter, a digit or '_', at most 100 characters"
)
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


def check_seed(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise ScenarioError(f"{what}: seed {value!r} is not an integer in [0, 2^32)")
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Arm(Strict):
    """One attention configuration to run."""

    name: str = Field(pattern=_NAME, description="Run directory name; unique in the scenario.")
    attn_type: str = Field(
        pattern=ATTN_TYPE_PATTERN,
        description="Attention backend: for the builtin runner a name from `harness backends`; for "
        "lightx2v one of LightX2V's attention types (checked by its pre-flight probe); for diffusers "
        "a name of its attention dispatcher (e.g. native, _native_flash, sage) or a harness backend.",
    )
    role: Role = Field(Role.candidate, description="reference (exactly one), noise_floor or candidate.")
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
    repeats: int | None = Field(
        None, ge=1, description="Runs of this arm per seed (default: the scenario's repeats)."
    )
    env: dict[str, EnvValue] = Field(default_factory=dict, description="Extra environment for this arm.")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Runner parameters for this arm only."
    )
    sageattention: Literal["package", "aiter_shim"] = Field(
        "package", description="lightx2v runner: which `sageattention` serves sage_attn2."
    )
    count_ops: dict[str, str] = Field(
        default_factory=dict,
        description="lightx2v runner: label -> 'module:function' this arm must call (e.g. the aiter op "
        "behind its backend), counted on every rank; an absent op or zero calls makes the arm invalid.",
    )
    description: str | None = None

    @field_validator("count_ops")
    @classmethod
    def _op_refs(cls, v: dict[str, str]) -> dict[str, str]:
        return check_op_refs(v)


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
    kind: Literal["local", "slurm"] = "local"
    slurm: SlurmBlock = Field(default_factory=SlurmBlock)


class BuiltinBlock(Strict):
    """The embedded tiny ref2av pipeline."""

    preset: Literal["tiny", "cpu", "gpu"] = "cpu"
    prompt: str = "a woman dances in the street, drums and a cheering crowd"
    params: dict[str, Any] = Field(default_factory=dict, description="Pipeline config overrides.")
    save_latents: bool = Field(True, description="Save the latent after every step (trajectory plots).")
    lossless: bool = Field(
        False,
        description="Also write output_lossless.mkv (FFV1 RGB + float PCM): pixel and audio metrics are then "
        "taken before compression, and the codec floor is the mp4's own error against it.",
    )


class ReportBlock(Strict):
    single_file: bool = Field(
        False, description="index.html with every image inlined (one file), not beside an assets/ folder."
    )


class Scenario(Strict):
    name: str = Field(pattern=_NAME)
    kind: Literal["e2e", "kernels"] = "e2e"
    description: str | None = None
    runner: Literal["builtin", "lightx2v", "diffusers"] | None = None
    seed: Seed | None = Field(None, description="The seed of every arm, an integer in [0, 2^32).")
    seeds: list[Seed] | None = Field(None, description="Several seeds: every arm runs once per seed.")
    env: dict[str, EnvValue] = Field(default_factory=dict)
    profiles: dict[SafeName, dict[str, Any]] = Field(
        default_factory=dict, description="Runner parameters by profile name (selected with --profile)."
    )
    default_profile: SafeName | None = None
    arms: list[Arm] = Field(default_factory=list)
    timeout_s: float | None = Field(None, gt=0, description="Per-arm time limit in seconds.")
    repeats: int = Field(
        1,
        ge=1,
        description="Runs of each arm per seed, each in its own process, in interleaved order "
        "(A B C A B C ...): the samples of the speed significance tests.",
    )
    verdict: VerdictRules = Field(default_factory=VerdictRules)
    executor: ExecutorBlock = Field(default_factory=ExecutorBlock)
    builtin: BuiltinBlock | None = None
    lightx2v: LightX2VBlock | None = None
    diffusers: DiffusersBlock | None = None
    kernels: KernelsBlock | None = None
    report: ReportBlock | None = None

    @field_validator("env")
    @classmethod
    def _env_str(cls, v: dict[str, EnvValue]) -> dict[str, EnvValue]:
        return {k: (("1" if x else "0") if isinstance(x, bool) else str(x)) for k, x in v.items()}

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.kind == "kernels":
            if self.kernels is None:
                raise ValueError("kind 'kernels' needs a 'kernels' block")
            return self
        if self.runner is None:
            raise ValueError("'runner' is required (builtin, lightx2v or diffusers)")
        if self.seed is not None and self.seeds is not None:
            raise ValueError("give 'seed' or 'seeds', not both")
        if self.seeds is not None and (not self.seeds or len(set(self.seeds)) != len(self.seeds)):
            raise ValueError("'seeds' must be a non-empty list of distinct integers")
        if not self.arms:
            raise ValueError("'arms' must list at least one arm")
        names = [a.name for a in self.arms]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"arm names must be unique; repeated: {', '.join(dups)}")
        refs = [a.name for a in self.arms if a.role == Role.reference]
        if len(refs) != 1:
            found = ", ".join(refs) if refs else "none"
            raise ValueError(f"exactly one arm must have role: reference (found {found})")
        if self.runner == "lightx2v" and self.lightx2v is None:
            raise ValueError("runner 'lightx2v' needs a 'lightx2v' block")
        if self.runner == "diffusers" and self.diffusers is None:
            raise ValueError("runner 'diffusers' needs a 'diffusers' block")
        if self.runner == "lightx2v":
            for a in self.arms:
                if a.kv_chunks > 1 or a.attn_options:
                    raise ValueError(
                        f"arm {a.name}: kv_chunks and attn_options are served by the builtin runner only "
                        "(the LightX2V launcher applies kv_reversed alone)"
                    )
        if self.default_profile is not None and self.default_profile not in self.profiles:
            raise ValueError(f"default_profile {self.default_profile!r} is not one of the profiles")
        return self

    @property
    def seed_list(self) -> list[int]:
        return list(self.seeds) if self.seeds else [self.seed if self.seed is not None else 42]

    @property
    def reference(self) -> Arm:
        return next(a for a in self.arms if a.role == Role.reference)

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise ScenarioError(
            f"scenario {self.name}: no arm named {name!r} (arms: {', '.join(self.arm_names)})"
        )

    @property
    def arm_names(self) -> list[str]:
        return [a.name for a in self.arms]

    def runner_block(self) -> BaseModel | None:
        return getattr(self, self.runner) if self.runner else None


def unknown_backend(scenario: Scenario) -> tuple[tuple, str] | None:
    """(field location, one line) for the first backend name the harness registry lacks: the
    builtin runner's arms and a kernels scenario's backends.

    LightX2V arms name LightX2V's own attention types, which only its pre-flight probe can check.
    """
    names: list[tuple[tuple, str]] = []
    if scenario.kind == "kernels" and scenario.kernels is not None:
        names = [(("kernels", "backends", i), b.backend) for i, b in enumerate(scenario.kernels.backends)]
    elif scenario.runner == "builtin":
        names = [(("arms", i, "attn_type"), a.attn_type) for i, a in enumerate(scenario.arms)]
    if not names:
        return None
    from harness.attention import list_backends

    known = list_backends()
    for loc, name in names:
        if name not in known:
            hint = difflib.get_close_matches(name, known, n=1)
            tip = f"; did you mean {hint[0]!r}?" if hint else ""
            return (
                loc,
                f"unknown attention backend {name!r}{tip} (the harness registry has: {', '.join(known)})",
            )
    return None


def runner_arm_problem(scenario: Scenario) -> tuple[tuple, str] | None:
    """(field location, one line) for the first arm the scenario's runner refuses (diffusers: ``check_arm``)."""
    if scenario.kind != "e2e" or scenario.runner != "diffusers":
        return None
    for i, arm in enumerate(scenario.arms):
        problem = check_arm(arm)
        if problem:
            return ("arms", i, problem[0]), problem[1]
    return None


# --- loading -----------------------------------------------------------------------------------

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_vars(value: str, environ: typing.Mapping[str, str]) -> str:
    """Expand ${VAR} and ${VAR:-default}; an unset variable without default raises KeyError(VAR)."""

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in environ and environ[name] != "":
            return environ[name]
        if default is not None:
            return default
        raise KeyError(name)

    return _VAR.sub(sub, value)


def _line_map(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    out = {} if out is None else out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, val in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue  # a mapping or list as a key: the schema rejects it, without a line of its own
            out[path + (key.value,)] = key.start_mark.line + 1
            _line_map(val, path + (key.value,), out)
            out[path + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, path + (i,), out)
    return out


def _fmt_loc(loc: tuple) -> str:
    s = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for a mapping key: the key itself is the field
            continue
        if isinstance(part, int):
            s += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            s += f".{part}" if s else str(part)
        else:
            s += f"[{str(part)!r}]"
    return s or "(top level)"


def _line_for(lines: dict[tuple, int], loc: tuple) -> int:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return 1


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``loc`` (to list the keys that were expected)."""
    model: Any = Scenario
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        model = _inner_model(model.model_fields[part].annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _inner_model(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType, list, dict):
        for arg in typing.get_args(tp):
            found = _inner_model(arg)
            if isinstance(found, type) and issubclass(found, BaseModel):
                return found
        return None
    return tp


def _describe(err: dict) -> str:
    loc, kind, msg = tuple(err["loc"]), err["type"], err["msg"]
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = list(parent.model_fields) if parent else []
        hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        tip = f"; did you mean {hint[0]!r}?" if hint else ""
        return f"unknown key{tip} (expected one of: {', '.join(allowed)})" if allowed else "unknown key"
    if kind == "missing":
        return "required field is missing"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    got = err.get("input")
    rules = {NAME_PATTERN: NAME_RULE, ATTN_TYPE_PATTERN: ATTN_TYPE_RULE}
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") in rules:
        return f"{got!r} is not a valid name ({rules[err['ctx']['pattern']]})"
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return f"{msg} (got {shown})"


def parse_scenario(
    text: str, source: str = "<scenario>", environ: typing.Mapping[str, str] | None = None
) -> Scenario:
    environ = os.environ if environ is None else environ
    try:
        data, node = load_yaml(text)
    except YamlProblem as err:
        where = f"{source}:{err.line}" if err.line else source
        raise ScenarioError(f"{where}: {err.message}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}:1: expected a mapping of scenario fields at the top level")
    try:
        lines = _line_map(node)
    except RecursionError:
        raise ScenarioError(f"{source}:1: nested too deeply") from None

    def expand(value: Any, path: tuple) -> Any:
        if isinstance(value, str):
            try:
                return expand_vars(value, environ)
            except KeyError as missing:
                raise ScenarioError(
                    f"{source}:{_line_for(lines, path)}: {_fmt_loc(path)}: environment variable "
                    f"{missing.args[0]} is not set (used as ${{{missing.args[0]}}}; set it or write "
                    f"${{{missing.args[0]}:-default}})"
                ) from None
        if isinstance(value, dict):
            return {k: expand(v, path + (k,)) for k, v in value.items()}
        if isinstance(value, list):
            return [expand(v, path + (i,)) for i, v in enumerate(value)]
        return value

    try:
        data = expand(data, ())
    except RecursionError:
        raise ScenarioError(f"{source}:1: nested too deeply") from None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        # A typo'd key also makes its real key "missing": name the typo, it is the cause.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        loc = tuple(first["loc"])
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        text = f"{source}:{_line_for(lines, loc)}: {_fmt_loc(loc)}: {_describe(first)}{more}"
        raise ScenarioError(" ".join(text.split())) from None
    bad_backend = unknown_backend(scenario) or runner_arm_problem(scenario)
    if bad_backend:
        loc, why = bad_backend
        raise ScenarioError(f"{source}:{_line_for(lines, loc)}: {_fmt_loc(loc)}: {why}")
    return scenario


def resolve_scenario_path(ref: str | Path) -> Path:
    """A path, or a bare name looked up as scenarios/<name>.yaml."""
    path = Path(ref)
    if path.exists():
        return path
    for cand in (SCENARIO_DIR / f"{ref}.yaml", SCENARIO_DIR / f"{ref}.yml"):
        if cand.exists():
            return cand
    raise ScenarioError(f"{ref}: scenario file not found")


def load_scenario(ref: str | Path, environ: typing.Mapping[str, str] | None = None) -> Scenario:
    """Load a scenario file; ``${SCENARIO_DIR}`` expands to its folder (for inputs kept beside it)."""
    path = resolve_scenario_path(ref)
    try:
        text = path.read_text()
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read ({err.strerror})") from None
    environ = dict(os.environ if environ is None else environ)
    environ.setdefault("SCENARIO_DIR", str(path.resolve().parent))
    return parse_scenario(text, str(path), environ)


def list_scenarios(folder: Path = SCENARIO_DIR) -> list[Path]:
    return sorted(p for p in folder.glob("*.y*ml")) if folder.is_dir() else []


def json_schema() -> dict[str, Any]:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "harness scenario"
    return schema
