"""``harness scenarios list|validate|schema``: scenario files listed, checked, and the JSON Schemas."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from harness.cli.common import out, say_err
from harness.errors import Exit, HarnessError

HELP = "List, validate and describe scenario files."


def load_as_written(path: str | Path):
    """(the scenario, its variables unset here): each unset ${VAR} stands for itself while checked."""
    import os

    from harness.scenario.load import load_scenario, unset_variables

    unset = unset_variables(path)
    return load_scenario(path, {**os.environ, **{v: f"${{{v}}}" for v in unset}}), unset


def contents(s) -> str:
    """What a scenario runs: an e2e scenario's arms, a kernels scenario's backends x shapes."""
    if s.kind != "kernels":
        return f"{len(s.arms)} arms" + (
            f" x {len(s.inputs)} inputs" if s.inputs and len(s.inputs) > 1 else ""
        )
    k, pairs = s.kernels, sum(len(s.kernels.entries_for(shape)) for shape in s.kernels.shapes)
    every = len(k.backends) * len(k.shapes)
    some = f", {pairs} of the {every} pairs measured" if pairs != every else ""
    captured = f", {len(k.captured)} captured input(s)" if k.captured else ""
    return f"{len(k.backends)} backends x {len(k.shapes)} shapes{some}{captured}"


def scenarios_list(folder: Path = typer.Option(Path("scenarios"), help="Folder to list.")):
    """List scenario files with their runner, arms (or backends x shapes) and profiles."""
    from rich.table import Table

    from harness.scenario.load import list_scenarios

    table = Table()
    for col in ("file", "name", "kind", "runner", "runs", "profiles", "status"):
        table.add_column(col)
    for path in list_scenarios(folder):
        try:
            s, unset = load_as_written(path)
            status = f"ok (a run needs {', '.join(unset)})" if unset else "ok"
            table.add_row(
                str(path), s.name, s.kind, s.runner or "-", contents(s), ",".join(s.profiles), status
            )
        except HarnessError as e:
            table.add_row(str(path), "-", "-", "-", "-", "-", f"[red]{e}[/]")
    out.print(table)


def scenarios_validate(files: list[str] = typer.Argument(..., help="Scenario files.")):
    """Validate scenario files; the first problem of each is named with file, line and field.
    A ${VAR} unset here is what a run needs of its machine: named, not a problem of the file."""
    from harness.plan import build_plan

    bad = 0
    for f in files:
        try:
            s, unset = load_as_written(f)
            if s.kind == "e2e":
                for profile in [None, *s.profiles]:
                    build_plan(s, profile=profile)
            needs = f"; a run needs {', '.join(unset)} set (unset here)" if unset else ""
            # One plain line per file (never wrapped: it is grepped).
            print(f"{f}: ok ({s.kind}, {contents(s)}, profiles: {', '.join(s.profiles) or '-'}{needs})")
        except HarnessError as e:
            say_err(str(e))
            bad += 1
    if bad:
        raise typer.Exit(Exit.BAD_INPUT)


def scenarios_schema(
    gate: bool = typer.Option(False, "--gate", help="The schema of a gate file (compare --gate) instead."),
):
    """Print the scenario JSON Schema (for editors), or with --gate the gate file's."""
    if gate:
        from harness.compare.gates import gate_schema as schema
    else:
        from harness.scenario.load import json_schema as schema
    sys.stdout.write(json.dumps(schema(), indent=2) + "\n")


COMMANDS = {  # name -> (function, epilog)
    "list": (scenarios_list, None),
    "validate": (scenarios_validate, "Example: harness scenarios validate scenarios/e2e_3step.yaml"),
    "schema": (scenarios_schema, "Example: harness scenarios schema --gate > gate.schema.json"),
}
