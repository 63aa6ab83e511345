"""The scenario fields of in-situ measurement and hybrid schedules (an arm's ``shadows``, ``insitu``
and ``schedule``; ``accepted_baseline``, ``insitu_tolerance``), their rules and run-spec form."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.records import AttentionChoice, CaptureSettings, InSituSettings, Role, ShadowSpec, StepSchedule
from harness.scenario.parts import FieldProblem
from harness.scenario.verdict import accepted_baseline

FORBID = ConfigDict(extra="forbid", populate_by_name=True)


class CaptureBlock(CaptureSettings):
    model_config = FORBID


class InSituBlock(InSituSettings):
    """``insitu:`` of an arm (the defaults when an arm has ``shadows`` and no ``insitu``)."""

    model_config = FORBID
    capture: CaptureBlock | None = Field(
        None, description="Keep the q/k/v of chosen calls (safetensors) for `harness kernels`."
    )


class ScheduleBlock(StepSchedule):
    """``schedule:`` of an arm: e.g. ``{exact_first: 1, exact_last: 1, exact: torch_sdpa}``."""

    model_config = FORBID

    @model_validator(mode="after")
    def _some_step(self) -> ScheduleBlock:
        if not (self.exact_first or self.exact_last or self.exact_steps):
            raise ValueError("the schedule names no exact step (give exact_first, exact_last or exact_steps)")
        if any(s < 1 for s in self.exact_steps):
            raise ValueError(f"exact_steps count from 1 (got {sorted(self.exact_steps)})")
        return self


class InSituTolerance(BaseModel):
    """How an in-situ reading judges a candidate (every line prints the rule it used)."""

    model_config = ConfigDict(extra="forbid")

    floor_ratio: float = Field(
        2.0,
        gt=0,
        description="Within the floor when the candidate's pooled rel L1, divided by the exact floor's on "
        "the same calls, is at most this (the whole 95 % interval; outside when the whole interval is above).",
    )
    baseline_ratio: float = Field(
        1.1, gt=0, description="Against the accepted baseline: the candidate's rel L1 at most this times its."
    )
    max_rel_l1: float | None = Field(None, gt=0, description="Absolute: pooled rel L1 at most this.")
    call_ratio: float = Field(
        10.0,
        gt=1,
        description="Per call: the worst call's rel L1 over its own exact floor, divided by the median call's "
        "(at least 1), at most this: one call far off is outside, whatever the pooled reading says.",
    )
    max_call_rel_l1: float | None = Field(
        0.2, gt=0, description="Absolute, per call: every call's rel L1 at most this (null: no such limit)."
    )
    min_cosine: float | None = Field(None, gt=-1, le=1, description="Absolute: mean cosine at least this.")


def insitu_settings(arm: Any) -> InSituSettings | None:
    """The arm's in-situ settings as a run spec carries them (defaults when it has shadows only)."""
    if arm.insitu is not None:
        return InSituSettings.model_validate(arm.insitu.model_dump())
    return InSituSettings() if arm.shadows else None


def shadow_specs(arms: Mapping[str, Any], arm: Any) -> list[ShadowSpec]:
    """The arm's shadows: an arm's name gives its attention, any other a backend with its defaults
    (``arms`` built once per plan: a map per arm made planning quadratic)."""
    choices = [(n, arms[n].choice() if n in arms else AttentionChoice(attn_type=n)) for n in arm.shadows]
    return [ShadowSpec(name=name, **choice.model_dump()) for name, choice in choices]


def schedule_spec(arm: Any) -> StepSchedule | None:
    return None if arm.schedule is None else StepSchedule.model_validate(arm.schedule.model_dump())


def check_insitu(scenario: Any, runner_measures: bool = True) -> None:
    """Shadows name other arms or backends, once each; a schedule arm is no shadow nor reference; the
    accepted baseline (either key) is one, an arm or a shadow; ``runner_measures`` False refuses them all."""
    arms = {a.name: a for a in scenario.arms}
    shadowed: set[str] = set()
    for i, arm in enumerate(scenario.arms):
        field = next((f for f in ("shadows", "insitu", "schedule") if getattr(arm, f)), None)
        if not runner_measures and field is not None:
            why = f"runner {scenario.runner} does not measure shadows or route schedules: no {field} here"
            raise FieldProblem(("arms", i, field), why)
        if arm.name in arm.shadows:
            raise FieldProblem(("arms", i, "shadows"), f"arm {arm.name} cannot shadow itself")
        if dups := sorted(s for s, n in Counter(arm.shadows).items() if n > 1):
            raise FieldProblem(("arms", i, "shadows"), f"named more than once: {', '.join(dups)}")
        for name in arm.shadows:
            if name in arms and arms[name].schedule is not None:
                raise FieldProblem(
                    ("arms", i, "shadows"),
                    f"{name} has a schedule (its routing follows the steps of its own run): it cannot be a shadow",
                )
        shadowed.update(arm.shadows)
        if arm.schedule is not None and arm.role == Role.reference:
            raise FieldProblem(
                ("arms", i, "schedule"), "the reference runs one backend on every step: no schedule"
            )
    base = accepted_baseline(scenario)  # one name, either key; two that differ are refused
    if base is not None and base not in arms and base not in shadowed:
        raise FieldProblem(
            ("accepted_baseline",) if scenario.accepted_baseline else ("verdict", "accepted_baseline"),
            f"{base!r} is neither an arm nor a shadow of one (arms: {', '.join(arms)})",
        )
