"""Imported first by the `harness` command: Ctrl-C or SIGTERM while the CLI's imports load is a
quiet exit 130 (nothing is written yet), not a traceback. ``harness.cli.main`` then installs the
real handlers. When the CLI package is imported as a library, nothing is changed."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

PROGRAM = "harness.cli"
_OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")


def _stop_quietly(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)


def command_line_module(argv: list[str]) -> str | None:
    """The module of ``python [options] -m MODULE ...`` (None for a script, ``-c`` or stdin).

    Read from the interpreter's own arguments: while ``python -m harness.cli`` imports the
    package (before its ``__main__`` runs), ``sys.argv[0]`` is only "-m".
    """
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg.startswith("-m"):
            return arg[2:]
        if arg in _OPTIONS_WITH_VALUE:
            i += 2
            continue
        if arg == "-c" or arg == "-" or not arg.startswith("-"):
            return None
        i += 1
    return None


def _started_as_the_program() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (
        getattr(spec, "name", None) in (PROGRAM, f"{PROGRAM}.__main__")
        or command_line_module(list(getattr(sys, "orig_argv", []))) == PROGRAM
        or Path(sys.argv[0] if sys.argv else "").name == "harness"
    )


# The signals handled here, for main() to hand over (one ignored by the parent stays ignored).
HANDLED: set[int] = set()
if _started_as_the_program():
    for _sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(_sig) is not signal.SIG_IGN:
            signal.signal(_sig, _stop_quietly)
            HANDLED.add(_sig)
