"""The ``harness`` command: a thin typer layer, one module per command (parsing and printing only;
each command imports the library it calls inside its function). ``common`` holds what they share,
``program`` assembles them into the app and ``main`` (every outcome mapped to an exit code)."""

from __future__ import annotations

import harness.cli_startup  # noqa: F401  (first: a quiet Ctrl-C while the rest loads)

# isort: split
from harness.cli.program import app, main

__all__ = ["app", "main"]
