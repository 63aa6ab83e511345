"""User-facing errors: one line, non-zero exit, no traceback."""


class HarnessError(Exception):
    """An error the user can fix (bad input, missing file, unavailable backend).

    The CLI prints ``str(err)`` on one line and exits with ``exit_code``.
    """

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ScenarioError(HarnessError):
    """The scenario file is invalid (exit 2, like a usage error)."""

    exit_code = 2


class BackendUnavailable(HarnessError):
    """An attention backend cannot run on this machine; the message says why."""
