"""A campaign, the library behind `harness run`: ``plan_campaign`` checks every input, ``dry_run``
shows what would launch, ``execute(plan, lock=lock_campaign(...))`` runs it under the campaign's
lock, keeps campaign.json current and builds the report."""

from __future__ import annotations

import contextlib
import errno
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness import __version__
from harness.envinfo import fingerprint
from harness.errors import HarnessError, UsageError
from harness.executors.base import Reporter
from harness.executors.process import stop_orphan
from harness.number_format import percent_text
from harness.plan import Plan, PlannedRun, dry_run, plan_campaign
from harness.records import RunRecord, RunStatus, canonical_hash, stale_reason
from harness.registry import EXECUTORS
from harness.safe_write import WriteError, atomic_write_text
from harness.scenario.dose import SOURCE_COPY
from harness.store import ArmStatus, CampaignDir, CampaignRecord, RunDir, move_aside, sha256_file, utcnow
from harness.writer_lock import CampaignLock, LockHolder

# The library API of the module docstring (dry_run and plan_campaign come from harness.plan).
__all__ = ["CampaignOutcome", "dry_run", "execute", "lock_campaign", "plan_campaign"]


@dataclass(frozen=True)
class SummaryRow:  # one run of the campaign as the end-of-run table shows it
    key: str
    role: str
    status: str
    valid: bool | None
    s_per_step: float | None
    pipeline_total_s: float | None
    provenance: str  # "now" (this invocation ran it), "kept" (ok before, skipped), "earlier" (not reached)


@dataclass
class CampaignOutcome:
    campaign: CampaignDir
    records: list[RunRecord] = field(default_factory=list)
    report_paths: object | None = None
    interrupted: bool = False
    report_error: str | None = None
    planned: list[PlannedRun] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)  # keys of the runs this invocation executed
    notes: list[str] = field(default_factory=list)  # one line each: repairs, de-duplicated seeds
    damaged: list[str] = field(default_factory=list)  # run.json files still unreadable at the end

    @property
    def failed(self) -> list[RunRecord]:
        """Runs that did not end ok or skipped (the backend cannot run here), or are invalid."""
        ok, skipped = RunStatus.ok, RunStatus.skipped
        return [r for r in self.records if r.status != skipped and (r.status != ok or r.valid is False)]

    @property
    def mixed_provenance(self) -> bool:
        """Some rows were not made by this invocation (kept from before, or not reached)."""
        return any(rec.spec.key not in self.ran for rec in self.records)

    def summary_rows(self) -> list[SummaryRow]:
        """One row per run read at the end, with its timing where timing.json reads."""
        rows = []
        for rec in self.records:
            key = rec.spec.key
            try:
                timing = self.campaign.run(key).timing()
            except HarnessError:
                timing = None
            times = (timing.s_per_step, timing.pipeline_total_s) if timing else (None, None)
            head = (key, rec.spec.role.value, rec.status.value, rec.valid)
            action = next((p.action for p in self.planned if p.spec.key == key), None)
            origin = "now" if key in self.ran else "kept" if action == "skip-ok" else "earlier"
            rows.append(SummaryRow(*head, *times, origin))
        return rows


def lock_campaign(campaign: CampaignDir, on_wait: Callable[[LockHolder], None] | None = None) -> CampaignLock:
    """Create the campaign folder and take its lock (another run: exit 2; a report or ingest: waited for)."""
    try:
        campaign.path.mkdir(parents=True, exist_ok=True)
        return CampaignLock(campaign, "run", on_wait).acquire()
    except WriteError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # no space: a run failure (exit 3), the place itself is fine
        raise UsageError(f"--out: {err}") from None  # read-only or not ours: the place --out names
    except OSError as err:
        raise UsageError(f"--out: cannot create {campaign.path} ({err.strerror})") from None


def refresh_arms(campaign: CampaignDir, record: CampaignRecord, keys: Sequence[str]) -> None:
    """campaign.json's arm list from the run.json files (the run directories are the truth)."""
    record.arms = [
        ArmStatus.of(rec) for key in keys if (rec := campaign.run(key).record_or_none()) is not None
    ]
    campaign.write(record)


def execute(
    plan: Plan, *, lock: CampaignLock, reporter: Reporter | None = None, report: bool = True
) -> CampaignOutcome:
    """Run the plan under ``lock`` (released at the end), then build the report; a crashed arm is
    recorded and the others still run; Ctrl-C sets ``interrupted``, finished runs kept."""
    reporter = reporter or Reporter()
    campaign = plan.campaign
    if lock.campaign.path != campaign.path or lock.fd is None:
        raise ValueError(f"execute: the lock given is not held on {campaign.path}")
    outcome = CampaignOutcome(campaign, notes=list(plan.notes))
    for line in plan.notes:
        reporter.message(line)
    with lock:
        if lock.took_over is not None:
            _note(outcome, reporter, f"note: the campaign lock was left by {lock.took_over.describe()}, "
                  "which is gone; taken over")  # fmt: skip
        if plan.dose_source is not None:
            atomic_write_text(campaign.path / SOURCE_COPY, json.dumps(plan.dose_source, indent=1))
        _run_locked(plan, reporter, outcome)
        if report and not outcome.interrupted:
            _build_report(outcome)
    return outcome


def _note(outcome: CampaignOutcome, reporter: Reporter, line: str) -> None:
    outcome.notes.append(line)
    reporter.message(line)


def _repair(campaign: CampaignDir, planned: list[PlannedRun], outcome: CampaignOutcome, reporter) -> None:
    """Before anything runs: damaged run.json moved aside; runs left running by a gone harness marked
    interrupted (stale), their runner stopped."""
    planned_keys = {p.spec.key for p in planned}
    for run in campaign.runs():
        rec = None if run.key in planned_keys else run.record_or_none()
        why = stale_reason(rec) if rec is not None else None  # planned ones: below; damaged others: left
        if why:
            _mark_stale(run, rec, why, outcome, reporter)
    for p in planned:
        run = campaign.run(p.spec.key)
        if p.repair == "corrupt" and run.run_json.exists():
            problem = "unreadable"
            try:
                run.record()
            except HarnessError as err:
                problem = str(err)
            line = f"note: {p.spec.key}: run.json unreadable ({problem}); moved to {move_aside(run.run_json).name}"
            _note(outcome, reporter, f"{line}; re-run")
        elif p.repair == "stale":
            rec = run.record()
            _mark_stale(run, rec, stale_reason(rec) or "interrupted (stale)", outcome, reporter)


def _mark_stale(run: RunDir, rec: RunRecord, why: str, outcome: CampaignOutcome, reporter) -> None:
    if stop_orphan(rec):
        why += "; its runner was still running and has been stopped"
    rec.status, rec.reason = RunStatus.interrupted, why
    rec.ended_at = rec.ended_at or utcnow()
    run.write(rec)
    _note(outcome, reporter, f"note: {run.key}: {why}")


def _campaign_record(plan: Plan, previous: CampaignRecord | None) -> CampaignRecord:
    scenario = plan.scenario
    resolved = scenario.model_dump(mode="json")
    record = CampaignRecord(
        campaign_id=plan.campaign.path.name,
        scenario_name=scenario.name,
        scenario_file=str(plan.path) if plan.path is not None else None,
        scenario_sha256=sha256_file(plan.path) if plan.path is not None else None,
        scenario=resolved,
        profile=plan.profile,
        runner=scenario.runner,
        executor=plan.executor,
        created_at=previous.created_at if previous else utcnow(),
        harness_version=__version__,
        env=fingerprint(
            {k: str(v) for k, v in scenario.env.items()}, extra_repos=scenario.source_repos() or None
        ),
    )
    record.scenario["_hash"] = canonical_hash(resolved)
    return record


def _run_locked(plan: Plan, reporter: Reporter, outcome: CampaignOutcome) -> None:
    campaign, keys = plan.campaign, plan.keys
    planned = plan.actions()
    outcome.planned = planned
    _repair(campaign, planned, outcome, reporter)
    previous = None  # the existing campaign.json; a damaged one is moved aside (and said so)
    if campaign.campaign_json.exists():
        try:
            previous = campaign.record()
        except HarnessError as err:
            aside = move_aside(campaign.campaign_json).name
            _note(
                outcome, reporter, f"note: campaign.json unreadable ({err}); moved to {aside}; written anew"
            )
    record = _campaign_record(plan, previous)
    # Arms this run does not select (another --arms, an ingest) stay listed while their folders do.
    listed = [*keys, *(a.key for a in (previous.arms if previous else []) if a.key not in keys)]
    refresh_arms(campaign, record, listed)

    def on_record(rec: RunRecord) -> None:
        outcome.ran.add(rec.spec.key)
        refresh_arms(campaign, record, listed)

    slurm = {"slurm": plan.slurm, "resubmit_failed": plan.resubmit_failed} if plan.executor == "slurm" else {}
    executor = EXECUTORS.get(plan.executor)(**slurm)  # an unknown name: one line (did you mean)
    # repeats: auto runs by round: round n holds every arm's n-th run of every seed
    repeats = [None] if plan.auto is None else sorted({p.spec.repeat for p in planned})
    rounds = [[p for p in planned if n is None or p.spec.repeat == n] for n in repeats]
    try:
        for n, batch in enumerate(rounds, 1):
            executor.run(campaign, batch, reporter, on_record)
            if plan.auto is not None and n >= plan.auto.min:
                stop = auto_stop(plan, n, last=n == len(rounds))
                if stop is not None:
                    _note(outcome, reporter, f"repeats auto: {stop}")
                    break
    except KeyboardInterrupt:
        outcome.interrupted = True
    except BaseException:
        with contextlib.suppress(WriteError):  # a full disk: the first failure is the one to name
            refresh_arms(campaign, record, listed)
        raise
    refresh_arms(campaign, record, listed)
    for run in (campaign.run(k) for k in keys):
        try:
            outcome.records += [run.record()] if run.exists() else []
        except HarnessError as err:
            outcome.damaged.append(str(err))


def auto_stop(plan: Plan, rounds: int, *, last: bool) -> str | None:
    """Why ``repeats: auto`` stops after ``rounds`` (None: go on): every speed-up interval narrower
    than the target, or the maximum reached."""
    from harness.analysis.speed import campaign_speed_tests, interval_widths
    from harness.compare.summary import summarize_run

    assert plan.auto is not None
    runs = []
    for run in (plan.campaign.run(spec.key) for spec in plan.specs):
        with contextlib.suppress(HarnessError):
            runs += [summarize_run(run)] if run.exists() else []
    ref = plan.scenario.reference.name
    widths = interval_widths(
        campaign_speed_tests(runs, ref, plan.scenario.verdict),
        {a.name: a.role.value for a in plan.scenario.arms},
    )
    target = plan.auto.target
    open_ = {k: w for k, w in widths.items() if w is None or w >= target}
    if not open_:
        return f"stopped after {rounds} round(s): every speed-up interval is narrower than {100 * target:g}%"
    if last:
        widest = max(open_, key=lambda k: math.inf if open_[k] is None else open_[k])
        w = open_[widest]
        shown = "no interval" if w is None else f"{percent_text(w)} wide"
        return f"stopped at the maximum of {rounds} round(s): {widest} is still {shown} (target {100 * target:g}%)"
    return None


def _build_report(outcome: CampaignOutcome) -> None:
    from harness.report import build_report

    try:
        outcome.report_paths = build_report(outcome.campaign)
    except HarnessError as err:
        outcome.report_error = f"report failed: {err}"
    except Exception as err:  # the runs are safe on disk; say what broke and keep going
        outcome.report_error = f"report failed: {type(err).__name__}: {err}"
