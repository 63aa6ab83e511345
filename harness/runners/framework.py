"""A framework (LightX2V, diffusers, torch under them) that cannot be imported in the ranks'
interpreter: no arm can run there, the reference included, so it is no "backend unavailable"
(a skip) but a failed run: ``harness run`` stops at the first pre-flight that finds it, with
one line naming the interpreter and the import that failed (exit 3), said once, not per arm.
"""

from __future__ import annotations

from harness.errors import Exit, HarnessError

# Set in a probe's facts when the framework itself failed to import (not one backend).
FRAMEWORK_FACT = "framework_unavailable"


class FrameworkUnavailable(HarnessError):
    """The framework cannot be imported where the runs would run (exit 3)."""

    exit_code = Exit.RUN_FAILED


def check_framework(framework: str, facts: dict, reason: object, python: str | None) -> None:
    """FrameworkUnavailable when a probe's ``facts`` say the framework itself failed to import."""
    if facts.get(FRAMEWORK_FACT):
        python = facts.get("python") or python
        where = f" by {python}" if python else ""
        raise FrameworkUnavailable(
            f"{framework} cannot be imported{where}: {reason}; no arm can run (a missing dependency of "
            f"{framework}, not an unavailable backend): install it in that interpreter or point the scenario "
            "at one that has it"
        )
