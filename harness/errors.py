"""User-facing errors and the exit codes every command shares (``EXIT_CODES_HELP``, as the
README's table says them): one line, no traceback."""

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    GATE_FAILED = 1
    BAD_INPUT = 2
    RUN_FAILED = 3
    INTERNAL = 4
    INTERRUPTED = 130


EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 a gate failed (verdicts are reported, not enforced); 2 bad input "
    "or usage (scenario, flags, gate file, unreadable or incompatible media, a path outside "
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
