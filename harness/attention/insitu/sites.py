"""Where an attention call is: the call site (DiT step, block, kind) the runner's own hooks set while
the model runs (a nested ``site(...)`` keeps what it does not set); the recorder, the per-step counts
and a schedule read it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

KINDS = ("dit_self", "refiner", "cross", "other")
_KEEP: Any = object()  # a site argument that was not given: keep the outer site's value


@dataclass(frozen=True)
class CallSite:
    step: int | None = None  # DiT step, from 1
    block: int | None = None  # transformer block, from 0
    kind: str = "other"  # one of KINDS
    steps: int | None = None  # DiT steps of the run, when the runner knows them (schedules need it)

    @property
    def step_key(self) -> str:
        """The step as the per-step call counts key it ("-": outside any step)."""
        return "-" if self.step is None else str(self.step)


class CallSites:
    """The current call site, set by nested ``site(...)`` blocks (one tracker per process)."""

    def __init__(self, steps: int | None = None):
        self.current = CallSite(steps=steps)

    @contextlib.contextmanager
    def site(
        self,
        *,
        step: int | None = _KEEP,
        block: int | None = _KEEP,
        kind: str = _KEEP,
        steps: int | None = _KEEP,
    ) -> Iterator[CallSite]:
        """The given fields inside the block (entering a step clears the block); restored after."""
        outer = self.current
        given = {
            k: v for k, v in dict(step=step, block=block, kind=kind, steps=steps).items() if v is not _KEEP
        }
        self.current = self._replaced({"block": None, "kind": "other", **given} if "step" in given else given)
        try:
            yield self.current
        finally:
            self.current = outer

    def set(self, **fields: Any) -> CallSite:
        """Set the site without a block (for hooks that see only the start of a step or block)."""
        if "step" in fields and "block" not in fields:
            fields = {"block": None, "kind": "other", **fields}
        self.current = self._replaced(fields)
        return self.current

    def _replaced(self, fields: dict[str, Any]) -> CallSite:
        if "kind" in fields and fields["kind"] not in KINDS:
            raise ValueError(f"call site kind {fields['kind']!r}; expected one of {', '.join(KINDS)}")
        return replace(self.current, **fields)
