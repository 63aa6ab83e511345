"""Names and seeds a scenario gives: safe folder names, and seeds that are integers in [0, 2^32)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StrictInt, StringConstraints

from harness.errors import ScenarioError

# Scenario, profile, campaign and arm names become folder names: one safe pattern for all of them.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
# An attention type is never a folder name; diffusers' dispatcher names may start with '_'.
ATTN_TYPE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"
ATTN_TYPE_RULE = (
    "letters, digits, '_', '.' and '-', starting with a letter, a digit or '_', at most 100 characters"
)
NAME_RULE = "letters, digits, '_', '.' and '-', starting with a letter or digit, at most 100 characters"
SafeName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
SEED_LIMIT = 2**32
# A seed is a plain integer in [0, 2^32): not a string, a float or a bool.
Seed = Annotated[StrictInt, Field(ge=0, lt=SEED_LIMIT)]
EnvValue = str | int | float | bool


def check_name(value: str, what: str) -> str:
    """``value`` if it is a safe name (a folder name that stays where it is put); else a one-line error."""
    if not isinstance(value, str) or not re.fullmatch(NAME_PATTERN, value):
        raise ScenarioError(f"{what}: {value!r} is not a valid name ({NAME_RULE})")
    return value


def check_seed(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise ScenarioError(f"{what}: seed {value!r} is not an integer in [0, 2^32)")
    return value
