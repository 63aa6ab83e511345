"""Reading scenario files: ${VAR} expansion, validation, and errors that name file, line and field."""

from __future__ import annotations

import os
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import ScenarioError
from harness.input_files import MAX_YAML_BYTES, InputError, read_input_text
from harness.registry import RUNNER_SCENARIO, RUNNERS, SCENARIO_KINDS
from harness.scenario.model import (
    E2E,
    Scenario,
    compose_model,
    describe_error,
    kind_names,
    scenario_model,
    unknown_kind,
)
from harness.scenario.parts import FieldProblem
from harness.scenario.plugins import load_plugins, sources_digest
from harness.strict_yaml import YamlProblem, format_loc, line_for, line_map, load_yaml

SCENARIO_DIR = Path("scenarios")
MORE_NAMED = 3  # problems named after a scenario's first; the rest counted

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_vars(value: str, environ: typing.Mapping[str, str]) -> str:
    """Expand ${VAR} and ${VAR:-default} (also for ""); unset or empty without default: KeyError(VAR)."""

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in environ and environ[name] != "":
            return environ[name]
        if default is not None:
            return default
        raise KeyError(name)

    return _VAR.sub(sub, value)


def validate_scenario(
    data: dict,
    lines: dict[tuple, int] | None = None,
    source: str = "<scenario>",
    base_dir: Path | None = None,
) -> Scenario:
    """A scenario from its data (one line naming source, line and field per problem); its plugins
    are imported first (the backends they register are names it may use)."""
    lines = lines or {}

    def where(loc: tuple) -> str:
        return f"{source}:{line_for(lines, loc)}: {format_loc(loc)}"

    refs, sources = data.get("plugins", []), data.get("sources", [])
    plugins, digest = [], ""
    folder = base_dir if base_dir is not None else Path(source).resolve().parent
    if isinstance(refs, list) and all(isinstance(r, str) for r in refs):  # else the model says why
        plugins = load_plugins(refs, folder, lambda i: where(("plugins", i)))
    if isinstance(sources, list) and all(isinstance(r, str) for r in sources):
        digest = sources_digest(sources, folder, lambda i: where(("sources", i)))
    # The runner and the kind decide a scenario's fields: an unknown one is named here, before the model.
    kind, runner = data.get("kind", E2E), data.get("runner")
    if isinstance(kind, str) and kind not in kind_names():
        raise ScenarioError(f"{where(('kind',))}: {unknown_kind(kind)}")
    if isinstance(runner, str) and runner not in RUNNERS:
        raise ScenarioError(f"{where(('runner',))}: {RUNNERS.unknown_message(runner)}")
    model = scenario_model(runner, kind)
    try:
        scenario = model.model_validate(data)
        scenario._plugin_refs, scenario._sources_digest = plugins, digest
        return scenario
    except FieldProblem as problem:  # a runner's or kind's check: it names its field
        raise ScenarioError(" ".join(f"{where(problem.loc)}: {problem.message}".split())) from None
    except ValidationError as exc:
        # A typo'd key also makes its real key "missing": name the typo, it is the cause.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        named = [(tuple(e["loc"]), describe_error(model, e)) for e in errors[: MORE_NAMED + 1]]
        also = [f"line {line_for(lines, loc)}: {format_loc(loc)}: {why}" for loc, why in named[1:]]
        also += [f"and {len(errors) - len(named)} more problem(s)"] if len(errors) > len(named) else []
        text = f"{where(named[0][0])}: {named[0][1]}" + (f" (also: {'; '.join(also)})" if also else "")
        raise ScenarioError(" ".join(text.split())) from None


def parse_scenario(
    text: str,
    source: str = "<scenario>",
    environ: typing.Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> Scenario:
    environ = os.environ if environ is None else environ
    try:
        data, node = load_yaml(text)
    except YamlProblem as err:
        where = f"{source}:{err.line}" if err.line else source
        raise ScenarioError(f"{where}: {err.message}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}:1: expected a mapping of scenario fields at the top level")
    lines = line_map(node)  # iterative: any depth the parser accepted

    def expand(value: Any, path: tuple) -> Any:
        if isinstance(value, str):
            try:
                return expand_vars(value, environ)
            except KeyError as missing:
                name = missing.args[0]
                state = "is set but empty" if name in environ else "is not set"
                raise ScenarioError(
                    f"{source}:{line_for(lines, path)}: {format_loc(path)}: environment variable "
                    f"{name} {state} (used as ${{{name}}}; set it or write ${{{name}:-default}})"
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
    return validate_scenario(data, lines, source, base_dir)


def resolve_scenario_path(ref: str | Path) -> Path:
    """A path, or a bare name looked up as scenarios/<name>.yaml."""
    path = Path(ref)
    if os.path.lexists(path):  # a broken link or a link loop is that file's problem, named by the reader
        return path
    for cand in (SCENARIO_DIR / f"{ref}.yaml", SCENARIO_DIR / f"{ref}.yml"):
        if cand.exists():
            return cand
    raise ScenarioError(f"{ref}: scenario file not found")


def load_scenario(ref: str | Path, environ: typing.Mapping[str, str] | None = None) -> Scenario:
    """Load a scenario file; ``${SCENARIO_DIR}`` expands to its folder (for inputs kept beside it)."""
    path = resolve_scenario_path(ref)
    try:
        text = read_input_text(path, "scenario file", max_bytes=MAX_YAML_BYTES, allow_empty=True)
    except InputError as err:
        raise ScenarioError(str(err)) from None
    environ = dict(os.environ if environ is None else environ)
    environ.setdefault("SCENARIO_DIR", str(path.resolve().parent))
    return parse_scenario(text, str(path), environ, path.resolve().parent)


def unset_variables(ref: str | Path, environ: typing.Mapping[str, str] | None = None) -> list[str]:
    """The ``${VAR}`` (no default) a scenario file uses that are unset or empty here, in order."""
    environ = os.environ if environ is None else environ
    path = resolve_scenario_path(ref)
    try:
        data, _ = load_yaml(
            read_input_text(path, "scenario file", max_bytes=MAX_YAML_BYTES, allow_empty=True)
        )
    except (InputError, YamlProblem, RecursionError):
        return []
    names: dict[str, None] = {}

    def walk(value: Any) -> None:
        if isinstance(value, str):
            for m in _VAR.finditer(value):
                if m.group(2) is None and not environ.get(m.group(1)) and m.group(1) != "SCENARIO_DIR":
                    names[m.group(1)] = None
        elif isinstance(value, (dict, list)):
            for v in value.values() if isinstance(value, dict) else value:
                walk(v)

    try:
        walk(data)
    except RecursionError:
        return []
    return list(names)


def list_scenarios(folder: Path = SCENARIO_DIR) -> list[Path]:
    return sorted(folder.glob("*.y*ml")) if folder.is_dir() else []


def json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files (for editors): every registered runner's and kind's fields."""
    runners = tuple(RUNNER_SCENARIO.get(n) for n in RUNNER_SCENARIO.names())
    kinds = tuple(SCENARIO_KINDS.get(n) for n in SCENARIO_KINDS.names())
    schema = compose_model(runners, kinds).model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "harness scenario"
    return schema
