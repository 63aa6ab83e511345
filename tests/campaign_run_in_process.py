"""`harness run` in the test's own process, for tests whose claim is about the campaign and not about
the command's process (its exit code, its signals): the same plan_campaign + execute the command
calls, without a second interpreter that imports torch again (imported by the tests)."""

from __future__ import annotations

from pathlib import Path

from harness.campaign import CampaignOutcome, execute, lock_campaign, plan_campaign


def run_campaign(
    path: Path, out: Path, *, arms: list[str] | None = None, report: bool = True
) -> CampaignOutcome:
    """What `harness run PATH --profile 3step --out OUT [--arms A,B] [--no-report]` does."""
    plan = plan_campaign(path, profile="3step", arms=arms, out_root=out)
    return execute(plan, lock=lock_campaign(plan.campaign), report=report)


def problems(outcome: CampaignOutcome) -> list[str]:
    """What makes `harness run` exit 3 or 130 (harness/cli/run.py); none is its exit 0."""
    failed = [f"{r.spec.key}: {r.status.value}" for r in outcome.failed]
    report_errors = list(getattr(outcome.report_paths, "errors", ()))
    ended = [e for e in [outcome.report_error, "interrupted" if outcome.interrupted else None] if e]
    return failed + outcome.damaged + report_errors + ended
