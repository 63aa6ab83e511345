"""``harness backends``: the attention backends, what each runs and whether it can run here."""

from __future__ import annotations

import typer

from harness.cli.common import out


def register(app: typer.Typer) -> None:
    app.command()(backends)


def backends():
    """List the attention backends: what each runs, whether it is available here (and why not)."""
    from rich.table import Table

    from harness.attention import availability, backend_class, list_backends

    table = Table()
    for col in ("backend", "runs", "available", "note"):
        table.add_column(col, overflow="fold")
    for name in list_backends():
        ok, why = availability(name)
        table.add_row(name, backend_class(name).description, "yes" if ok else "no", why)
    out.print(table)
