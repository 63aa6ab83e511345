"""The executor interface, what it is asked to run (planned runs) and the progress reporter it talks to;
executors by name: ``harness.registry.EXECUTORS`` (each one's module imported only when asked for)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from harness.records import RunRecord, RunSpec
from harness.store import CampaignDir


@dataclass
class PlannedRun:
    """One run of a campaign and what this invocation does with it (``harness.plan`` decides)."""

    spec: RunSpec
    action: str  # "run" | "skip-ok" (resume: already ok with the same spec hash) | "rerun"
    why: str
    # Set right before running: "corrupt" (run.json is moved aside) or "stale" (a run.json left
    # running by a harness that is gone is marked interrupted, its runner stopped if still there).
    repair: str | None = None


class Reporter:
    """Progress callbacks; the default does nothing (the CLI supplies a rich one)."""

    def run_started(self, spec: RunSpec, index: int, total: int) -> None: ...

    def run_progress(self, step: int, steps: int) -> None: ...

    def run_finished(self, record: RunRecord) -> None: ...

    def message(self, text: str) -> None: ...


OnRecord = Callable[[RunRecord], None]


class Executor(ABC):
    name: str

    @abstractmethod
    def run(
        self, campaign: CampaignDir, planned: list[PlannedRun], reporter: Reporter, on_record: OnRecord
    ) -> None:
        """Run every planned run that is not skipped; call on_record as each one ends."""
