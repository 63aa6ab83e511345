"""The ``harness`` command: a module per command (parsing and printing only, each importing its library
inside its function); ``common`` is what they share, ``program`` the app, ``main``, env, backends, kernels."""

from __future__ import annotations

import harness.cli_startup  # noqa: F401  (first: a quiet Ctrl-C while the rest loads)

# isort: split
from harness.cli.program import app, main

__all__ = ["app", "main"]
