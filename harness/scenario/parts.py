"""What a runner or a scenario kind adds to the scenario core, and the located problem its check raises.

A runner (``harness.plugins.RUNNER_SCENARIO``) or a kind (``harness.plugins.SCENARIO_KINDS``)
gives one :class:`ScenarioPart`: the model of its block (``lightx2v:``, ``kernels:``), the arm
fields only its arms have (merged into the arm model when a scenario names that runner), and a
check of the whole scenario. The core validates the block, the fields and the check through it
and never names a runner.
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
    """The scenario fields one runner or kind owns.

    ``block``/``model``: the top-level key and the pydantic model that validates it;
    ``required``: a scenario of this runner or kind must give the block; ``arm_fields``: a model
    of extra arm fields (its own validators included); ``check``: called with the validated
    scenario, raises :class:`FieldProblem`; ``repos``: source checkouts the block names, by label,
    recorded in the campaign's environment fingerprint; ``insitu``: the runner measures arms'
    ``shadows``/``insitu`` and routes their ``schedule`` (the arms of a runner that does not are
    refused them, so nothing is silently ignored).
    """

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
