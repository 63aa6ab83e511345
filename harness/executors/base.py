"""The executor interface and the progress reporter it talks to."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from harness.plan import PlannedRun
from harness.records import RunRecord, RunSpec
from harness.store import CampaignDir


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
