"""What a runner (``plugins.RUNNER_SCENARIO``) or a scenario kind (``plugins.SCENARIO_KINDS``) adds
to the scenario core, so that the core never names a runner: its block, its arm fields and its
check, and the located problem that check raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from harness.errors import ScenarioError
from harness.strict_yaml import format_loc


class FieldProblem(ScenarioError):
    """A problem of one field of a scenario: ``loc`` as pydantic gives it (``("arms", 2, "attn_type")``,
    ``()`` for the scenario as a whole); the loader adds the file and the line."""

    def __init__(self, loc: tuple, message: str):
        super().__init__(f"{format_loc(loc)}: {message}")
        self.loc = tuple(loc)
        self.message = message


@dataclass(frozen=True)
class ScenarioPart:
    """The scenario fields one runner or kind owns: ``block`` (top-level key) and the ``model`` that
    validates it, ``required`` or not; ``arm_fields``: a model of extra arm fields; ``check``: raises
    FieldProblem on the validated scenario; ``repos``: source checkouts the block names (recorded in
    the environment fingerprint); ``insitu``: the runner measures ``shadows``/``insitu`` and routes
    ``schedule`` (arms of a runner that does not are refused them: nothing silently ignored)."""

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
