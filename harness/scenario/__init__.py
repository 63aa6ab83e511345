"""Scenario files: the schema (a core plus what each runner and kind registers), loading with
${VAR} expansion, and errors that name file, line and field."""

from harness.scenario.load import (
    SCENARIO_DIR,
    expand_vars,
    json_schema,
    list_scenarios,
    load_scenario,
    parse_scenario,
    resolve_scenario_path,
    validate_scenario,
)
from harness.scenario.model import (
    E2E,
    Arm,
    ExecutorBlock,
    RepeatsAuto,
    ReportBlock,
    Scenario,
    SlurmBlock,
    Strict,
    full_model,
    kind_names,
    scenario_model,
)
from harness.scenario.names import (
    NAME_PATTERN,
    NAME_RULE,
    SEED_LIMIT,
    EnvValue,
    SafeName,
    Seed,
    check_name,
    check_seed,
)
from harness.scenario.parts import NO_PART, FieldProblem, ScenarioPart
from harness.scenario.verdict import VerdictRules
from harness.strict_yaml import format_loc, line_for, line_map

__all__ = [
    "E2E",
    "NAME_PATTERN",
    "NAME_RULE",
    "NO_PART",
    "SCENARIO_DIR",
    "SEED_LIMIT",
    "Arm",
    "EnvValue",
    "ExecutorBlock",
    "FieldProblem",
    "RepeatsAuto",
    "ReportBlock",
    "SafeName",
    "Scenario",
    "ScenarioPart",
    "Seed",
    "SlurmBlock",
    "Strict",
    "VerdictRules",
    "check_name",
    "check_seed",
    "expand_vars",
    "format_loc",
    "full_model",
    "json_schema",
    "kind_names",
    "line_for",
    "line_map",
    "list_scenarios",
    "load_scenario",
    "parse_scenario",
    "resolve_scenario_path",
    "scenario_model",
    "validate_scenario",
]
