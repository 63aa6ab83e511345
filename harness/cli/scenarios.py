"""``harness scenarios list|validate|schema``: scenario files listed, checked (the first problem of
each with file, line and field), and the JSON Schemas of a scenario and of a gate file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from harness.cli.common import group, out, say_err
from harness.errors import Exit, HarnessError


def register(app: typer.Typer) -> None:
    scenarios_app = group("List, validate and describe scenario files.")
    scenarios_app.command("list")(scenarios_list)
    scenarios_app.command("validate", epilog="Example: harness scenarios validate scenarios/e2e_3step.yaml")(
        scenarios_validate
    )
    scenarios_app.command("schema", epilog="Example: harness scenarios schema --gate > gate.schema.json")(
        scenarios_schema
    )
    app.add_typer(scenarios_app, name="scenarios")


def scenarios_list(folder: Path = typer.Option(Path("scenarios"), help="Folder to list.")):
    """List scenario files with their runner, arms and profiles."""
    from rich.table import Table

    from harness.scenario import list_scenarios, load_scenario

    table = Table()
    for col in ("file", "name", "kind", "runner", "arms", "profiles", "status"):
        table.add_column(col)
    for path in list_scenarios(folder):
        try:
            s = load_scenario(path)
            table.add_row(
                str(path), s.name, s.kind, s.runner or "-", str(len(s.arms)), ",".join(s.profiles), "ok"
            )
        except HarnessError as e:
            table.add_row(str(path), "-", "-", "-", "-", "-", f"[red]{e}[/]")
    out.print(table)


def scenarios_validate(files: list[str] = typer.Argument(..., help="Scenario files.")):
    """Validate scenario files; the first problem of each is named with file, line and field."""
    from harness.plan import build_plan
    from harness.scenario import load_scenario

    bad = 0
    for f in files:
        try:
            s = load_scenario(f)
            if s.kind == "e2e":
                for profile in [None, *s.profiles]:
                    build_plan(s, profile=profile)
            out.print(f"{f}: ok ({s.kind}, {len(s.arms)} arms, profiles: {', '.join(s.profiles) or '-'})")
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
        from harness.compare.gates import gate_schema

        sys.stdout.write(json.dumps(gate_schema(), indent=2) + "\n")
        return
    from harness.scenario import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")
