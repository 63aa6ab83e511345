"""What a runner or a scenario kind adds to the scenario core (which names no runner): its block, arm
fields and check, and the located problem that check raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from harness.errors import ScenarioError
from harness.strict_yaml import format_loc


class FieldProblem(ScenarioError):
    """A problem of one field: ``loc`` as pydantic gives it; the loader adds the file and the line."""

    def __init__(self, loc: tuple, message: str):
        super().__init__(f"{format_loc(loc)}: {message}")
        self.loc = tuple(loc)
        self.message = message


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; nested dicts merge key by key, anything else is replaced."""
    nested = {k for k, v in over.items() if isinstance(v, dict) and isinstance(base.get(k), dict)}
    return {**base, **{k: deep_merge(base[k], v) if k in nested else v for k, v in over.items()}}


@dataclass(frozen=True)
class ScenarioPart:
    """The scenario fields one runner or kind owns: ``block`` and its ``model``; ``arm_fields``; a
    ``check`` raising FieldProblem; ``repos`` (source checkouts, fingerprinted); ``insitu``: the runner
    measures shadows and routes schedules (else arms are refused them)."""

    block: str | None = None
    model: type[BaseModel] | None = None
    required: bool = False
    arm_fields: type[BaseModel] | None = None
    check: Callable[[Any], None] | None = None
    repos: Callable[[BaseModel], dict[str, str]] | None = None
    insitu: bool = False

    def __post_init__(self) -> None:
        if (self.block is None) != (self.model is None):
            raise ValueError("ScenarioPart: give block and model together")
        if self.required and self.block is None:
            raise ValueError("ScenarioPart: required needs a block")


NO_PART = ScenarioPart()
