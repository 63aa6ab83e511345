"""``harness env``: the environment fingerprint recorded into every campaign, as a table or JSON."""

from __future__ import annotations

import json
import sys

import typer

from harness.cli.common import out


def env(as_json: bool = typer.Option(False, "--json", help="Print the full fingerprint as JSON.")):
    """Show the environment fingerprint recorded into every campaign."""
    from harness.envinfo import fingerprint, summary_lines

    fp = fingerprint()
    if as_json:
        sys.stdout.write(json.dumps(fp, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table(show_header=False)
    for k, v in summary_lines(fp):
        table.add_row(k, v)
    out.print(table)
