"""Plausibility of the measurements a record carries, checked where the record is read, by the
rules ingest holds a LightX2V log to: a step or total that is not finite, negative or zero is no
measurement, a negative stage neither, and a step count or time beyond any real run is refused
before a sum of them overflows. Each is a ValueError the validation turns into one line.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator

MAX_DIT_STEPS = 10_000  # production schedules have tens of steps
MAX_SECONDS = 1e6  # 11.6 days: no step, stage or pipeline of a run lasts longer
T = TypeVar("T")


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{value} seconds: not a finite number")
    if value > MAX_SECONDS:
        raise ValueError(f"{value:g} seconds: above {MAX_SECONDS:g} s, no run lasts that long")
    return value


def positive_seconds(value: float) -> float:
    """A step or a total: finite, above zero (zero is no measurement), at most ``MAX_SECONDS``."""
    _finite(value)
    if value <= 0:
        raise ValueError(f"{value} seconds: {'negative' if value < 0 else 'zero is no measurement'}")
    return value


def stage_seconds(value: float) -> float:
    """A stage total: finite, not negative (a stage may take no time), at most ``MAX_SECONDS``."""
    _finite(value)
    if value < 0:
        raise ValueError(f"{value} seconds: negative")
    return value


def step_index(value: int) -> int:
    if not 1 <= value <= MAX_DIT_STEPS:
        raise ValueError(f"step {value}: DiT steps count from 1 to at most {MAX_DIT_STEPS}")
    return value


def step_count(steps: Any) -> Any:
    """At most ``MAX_DIT_STEPS`` steps, counted before any is read (one line, not one per step)."""
    if isinstance(steps, list) and len(steps) > MAX_DIT_STEPS:
        raise ValueError(f"{len(steps)} steps: more than {MAX_DIT_STEPS}, no schedule has that many")
    return steps


def distinct_steps(steps: list[Any]) -> list[Any]:
    seen: set[int] = set()
    for s in steps:
        if s.index in seen:
            raise ValueError(f"step {s.index} timed twice")
        seen.add(s.index)
    return steps


PositiveSeconds = Annotated[float, AfterValidator(positive_seconds)]
StageSeconds = Annotated[float, AfterValidator(stage_seconds)]
StepIndex = Annotated[int, AfterValidator(step_index)]
StepList = Annotated[
    list[T], BeforeValidator(step_count), AfterValidator(distinct_steps)
]  # the steps of one run
