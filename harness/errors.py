"""User-facing errors and the exit codes every command shares (``EXIT_CODES_HELP``, as the
README's table says them): one line, no traceback; and text from records made safe to show
(``visible``: control and direction characters written out, not obeyed). Stdlib only: the CLI's
plain lines use it before any heavy import (``harness --help`` stays lean)."""

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    GATE_FAILED = 1
    BAD_INPUT = 2
    RUN_FAILED = 3
    INTERNAL = 4
    INTERRUPTED = 130


EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 a gate failed (compare --gate, history --gate, a verdict report --fail-on "
    "names); 2 bad input or usage (scenario, flags, gate file, unreadable or incompatible media, a path outside "
    "--out, a campaign another run holds); 3 a run failed, was invalid or could not be measured; 4 a bug in the harness "
    "(traceback printed); 130 interrupted."
)


class HarnessError(Exception):
    """An error the user can fix: the CLI prints it on one line and exits with ``exit_code`` (2)."""

    exit_code = Exit.BAD_INPUT

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ScenarioError(HarnessError):
    """The scenario file is invalid (exit 2, like a usage error)."""


class UsageError(HarnessError):
    """A flag or argument of the command line is wrong; the message names it (exit 2)."""


class CampaignLocked(HarnessError):
    """Another ``harness run`` holds the campaign (exit 2); the message names it."""


class BackendUnavailable(HarnessError):
    """An attention backend cannot run on this machine; the message says why."""


# What a terminal or a text viewer would act on rather than show: C0 controls but tab and new line,
# DEL, C1 controls, and the bidirectional marks, embeddings, overrides and isolates (a line that
# reads backwards). Shown as Python writes them (``\x1b``, ``\u202e``): read, never obeyed.
_UNSEEN = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F,
           *range(0x202A, 0x202F), *range(0x2066, 0x206A)]  # fmt: skip
_VISIBLE = str.maketrans({c: ascii(chr(c))[1:-1] for c in _UNSEEN})


def visible(text: str) -> str:
    """``text`` with every control and bidirectional-override character written out as its escape:
    the one guard for strings from records on their way to a terminal or into Markdown."""
    return str(text).translate(_VISIBLE)
