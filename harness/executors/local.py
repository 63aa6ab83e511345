"""Local executor: the arms one after another on this machine, each in its own process."""

from __future__ import annotations

from harness.executors.base import Executor, OnRecord, PlannedRun, Reporter
from harness.executors.process import execute_run
from harness.store import CampaignDir


class LocalExecutor(Executor):
    name = "local"

    def run(
        self, campaign: CampaignDir, planned: list[PlannedRun], reporter: Reporter, on_record: OnRecord
    ) -> None:
        todo = [p for p in planned if p.action != "skip-ok"]
        for i, p in enumerate(todo):
            reporter.run_started(p.spec, i, len(todo))
            record = execute_run(p.spec, campaign.run(p.spec.key), on_progress=reporter.run_progress)
            on_record(record)
            reporter.run_finished(record)
