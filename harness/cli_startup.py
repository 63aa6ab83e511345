"""The start and end of the `harness` process: imported first, so Ctrl-C or SIGTERM while the CLI
loads is a quiet exit 130, not a traceback; ``end_program`` ends it. As a library, it changes nothing."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

PROGRAM = "harness.cli"
_OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")


def _stop_quietly(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)


def command_line_module(argv: list[str]) -> str | None:
    """The module of ``python [options] -m MODULE ...`` (None: a script, ``-c`` or stdin), from the
    interpreter's own arguments (while the package imports, ``sys.argv[0]`` is only "-m")."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg.startswith("-m"):
            return arg[2:]
        if arg == "-c" or arg == "-" or not arg.startswith("-"):
            return None
        i += 2 if arg in _OPTIONS_WITH_VALUE else 1
    return None


def _started_as_the_program() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (
        getattr(spec, "name", None) in (PROGRAM, f"{PROGRAM}.__main__")
        or command_line_module(list(getattr(sys, "orig_argv", []))) == PROGRAM
        or Path(sys.argv[0] if sys.argv else "").name == "harness"
    )


# Whether this process is the `harness` program (not a library user of the CLI package).
IS_PROGRAM = _started_as_the_program()
# The signals handled here, for main() to hand over (one ignored by the parent stays ignored).
HANDLED: set[int] = set()
if IS_PROGRAM:
    for _sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(_sig) is not signal.SIG_IGN:
            signal.signal(_sig, _stop_quietly)
            HANDLED.add(_sig)


def exit_status(code: object) -> int:
    """``sys.exit``'s convention: None 0, an int itself, else printed on stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def end_program(code: object) -> NoReturn:
    """End the finished process with ``code``, skipping the interpreter's teardown (it let a finished
    command end with a wrong status: SIGINT after a KeyboardInterrupt, SIGTERM while torch unloads)."""
    for sig in HANDLED:
        signal.signal(sig, signal.SIG_IGN)
    status = exit_status(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a stream closed by the command
            pass
    os._exit(status)
