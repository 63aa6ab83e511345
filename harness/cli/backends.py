"""``harness backends``: the attention backends, what each runs and whether it can run here."""

from __future__ import annotations

import typer

from harness.cli.common import out


def backends(
    scenario: str | None = typer.Argument(
        None, help="A scenario file: its plugins are imported first, so their backends are listed."
    ),
):
    """List the attention backends: what each runs, whether it is available here (and why not)."""
    from rich.table import Table

    from harness.attention.registry import BACKENDS
    from harness.scenario.load import load_scenario
    from harness.scenario.plugins import entry_point_plugins

    plugins = load_scenario(scenario).plugin_refs if scenario is not None else entry_point_plugins()
    labels = [(label.rpartition(" "), plugin.ref) for plugin in plugins for label in plugin.registers]
    origin = {name: ref for (what, _, name), ref in labels if what == "attention backend"}
    table = Table()
    for col in ("backend", "runs", "available", "note"):
        table.add_column(col, overflow="fold")
    for name in BACKENDS.names():
        ok, why = BACKENDS.get(name).availability()
        cls = BACKENDS.get(name)
        badge = default_badge(cls)
        runs = cls.description + (f"; by default {badge}" if badge else "")
        runs += f" (plugin {origin[name]})" if name in origin else ""
        table.add_row(name, runs, "yes" if ok else "no", why)
    out.print(table)


def default_badge(cls) -> str:
    """An emulator's provenance with its default options ('' for kernels, or where it will not build)."""
    if not cls.emulated:
        return ""
    try:
        provenance = cls().provenance
    except Exception:  # a plugin emulator that needs more than its defaults: its description says it
        return ""
    return provenance.badge() if provenance is not None else ""
