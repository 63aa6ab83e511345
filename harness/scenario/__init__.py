"""Scenario files: the schema (a core plus what each runner and kind registers), loading with
${VAR} expansion, and errors that name file, line and field."""

from harness.scenario.insitu import insitu_settings, schedule_spec, shadow_specs
from harness.scenario.load import (
    expand_vars,
    json_schema,
    list_scenarios,
    load_scenario,
    parse_scenario,
    resolve_scenario_path,
    unset_variables,
    validate_scenario,
)
from harness.scenario.model import Arm, RepeatsAuto, Scenario, SlurmBlock, Strict
from harness.scenario.names import SafeName, Seed, check_name, check_seed
from harness.scenario.parts import FieldProblem, ScenarioPart
from harness.scenario.verdict import VerdictRules

__all__ = [
    "Arm",
    "FieldProblem",
    "RepeatsAuto",
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
    "insitu_settings",
    "json_schema",
    "list_scenarios",
    "load_scenario",
    "parse_scenario",
    "resolve_scenario_path",
    "schedule_spec",
    "shadow_specs",
    "unset_variables",
    "validate_scenario",
]
