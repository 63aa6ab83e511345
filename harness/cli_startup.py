"""Imported first by the `harness` command: Ctrl-C or SIGTERM while the CLI's imports load is a
quiet exit 130 (nothing is written yet), not a traceback. ``harness.cli.main`` then installs the
real handlers. When the CLI module is imported as a library, nothing is changed."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def _stop_quietly(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)


def _started_as_the_program() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return (
        getattr(spec, "name", None) == "harness.cli"
        or Path(sys.argv[0] if sys.argv else "").name == "harness"
    )


# The signals handled here, for main() to hand over (one ignored by the parent stays ignored).
HANDLED: set[int] = set()
if _started_as_the_program():
    for _sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(_sig) is not signal.SIG_IGN:
            signal.signal(_sig, _stop_quietly)
            HANDLED.add(_sig)
