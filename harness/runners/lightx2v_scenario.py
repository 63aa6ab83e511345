"""What a ``runner: lightx2v`` scenario adds to the scenario core: the ``lightx2v:`` block, the arm
fields only LightX2V arms have, and the rule on what its launcher can apply.

Registered in ``harness.plugins.RUNNER_SCENARIO``; kept free of heavy imports (the loader imports
it for every lightx2v scenario).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from harness.runners.lightx2v.schema import LightX2VBlock, check_op_refs
from harness.scenario import FieldProblem, ScenarioPart, Strict


class LightX2VArmFields(Strict):
    """Arm fields of the lightx2v runner."""

    sageattention: Literal["package", "aiter_shim"] = Field(
        "package", description="lightx2v runner: which `sageattention` serves sage_attn2."
    )
    count_ops: dict[str, str] = Field(
        default_factory=dict,
        description="lightx2v runner: label -> 'module:function' this arm must call (e.g. the aiter op "
        "behind its backend), counted on every rank; an absent op or zero calls makes the arm invalid.",
    )

    @field_validator("count_ops")
    @classmethod
    def _op_refs(cls, v: dict[str, str]) -> dict[str, str]:
        return check_op_refs(v)


def check_perturbations(scenario: Any) -> None:
    """The LightX2V launcher reverses K/V; chunked K/V and backend options are the builtin runner's."""
    for a in scenario.arms:
        if a.kv_chunks > 1 or a.attn_options:
            raise FieldProblem(
                (),
                f"arm {a.name}: kv_chunks and attn_options are served by the builtin runner only "
                "(the LightX2V launcher applies kv_reversed alone)",
            )


def source_repos(block: Any) -> dict[str, str]:
    return {"lightx2v": block.root}


SCENARIO_PART = ScenarioPart(
    block="lightx2v",
    model=LightX2VBlock,
    required=True,
    arm_fields=LightX2VArmFields,
    check=check_perturbations,
    repos=source_repos,
)
