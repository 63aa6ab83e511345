"""A campaign: plan the runs of a scenario, execute them, keep campaign.json current, report.

This is the library function behind `harness run`; the CLI only parses options and shows progress.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from harness import __version__
from harness.envinfo import fingerprint
from harness.errors import HarnessError, UsageError
from harness.executors.base import Reporter
from harness.executors.process import stale_reason, stop_orphan
from harness.executors.registry import executor_names, get_executor
from harness.plan import PlannedRun, build_plan, plan_actions, select_profile
from harness.records import RunRecord, RunSpec, RunStatus, canonical_hash
from harness.runners import get_runner
from harness.scenario import (
    Scenario,
    SlurmBlock,
    check_name,
    check_seed,
    load_scenario,
    resolve_scenario_path,
)
from harness.store import (
    ArmStatus,
    CampaignDir,
    CampaignLock,
    CampaignRecord,
    LockHolder,
    RunDir,
    lock_holder,
    move_aside,
    sha256_file,
    utcnow,
)


@dataclass
class DryRunEntry:
    key: str
    action: str
    why: str
    preflight: str | None
    command: list[str]
    env: dict[str, str]

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.command)


@dataclass
class CampaignOutcome:
    campaign: CampaignDir
    records: list[RunRecord] = field(default_factory=list)
    dry_run: list[DryRunEntry] = field(default_factory=list)
    report_paths: object | None = None
    interrupted: bool = False
    report_error: str | None = None
    planned: list[PlannedRun] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)  # keys of the runs this invocation executed
    notes: list[str] = field(default_factory=list)  # one line each: repairs, de-duplicated seeds
    damaged: list[str] = field(default_factory=list)  # run.json files still unreadable at the end
    held_by: LockHolder | None = None  # dry run: the harness run that holds the campaign now

    @property
    def failed(self) -> list[RunRecord]:
        """Runs that did not end ok (skipped is fine: the backend cannot run here), or are invalid."""
        return [
            r
            for r in self.records
            if r.status not in (RunStatus.ok, RunStatus.skipped)
            or (r.status == RunStatus.ok and r.valid is False)
        ]

    def provenance(self, key: str) -> str:
        """Where a row of the summary comes from: "now" (this invocation ran it), "kept" (ok
        before, skipped) or "earlier" (planned, not reached before an interrupt)."""
        if key in self.ran:
            return "now"
        action = next((p.action for p in self.planned if p.spec.key == key), None)
        return "kept" if action == "skip-ok" else "earlier"

    @property
    def mixed_provenance(self) -> bool:
        """Some rows of the summary were not made by this invocation."""
        return any(rec.spec.key not in self.ran for rec in self.records)

    def summary_rows(self) -> list[SummaryRow]:
        """One row per run record, with its timing (from timing.json, when readable)."""
        rows = []
        for rec in self.records:
            timing = None
            try:
                timing = self.campaign.run(rec.spec.key).timing()
            except HarnessError:
                pass
            rows.append(
                SummaryRow(
                    key=rec.spec.key,
                    role=rec.spec.role.value,
                    status=rec.status.value,
                    valid=rec.valid,
                    s_per_step=timing.s_per_step if timing else None,
                    pipeline_total_s=timing.pipeline_total_s if timing else None,
                    provenance=self.provenance(rec.spec.key),
                )
            )
        return rows


@dataclass(frozen=True)
class SummaryRow:
    """One run of a campaign as ``harness run`` tabulates it."""

    key: str
    role: str
    status: str
    valid: bool | None
    s_per_step: float | None
    pipeline_total_s: float | None
    provenance: str  # "now", "kept" or "earlier" (CampaignOutcome.provenance)


def campaign_dir_for(
    scenario: Scenario, out_root: Path, campaign_id: str | None, profile: str | None
) -> CampaignDir:
    """reports/<scenario>/<campaign-id>; the id defaults to the profile, so a re-run resumes.

    Every part is a checked name, so the folder is always inside ``out_root``.
    """
    cid = check_name(campaign_id, "--campaign") if campaign_id is not None else (profile or "default")
    check_name(scenario.name, "scenario name")
    check_name(cid, "campaign id")
    path = Path(out_root) / scenario.name / cid
    if os.path.relpath(os.path.normpath(path), os.path.normpath(out_root)).startswith(".."):
        raise UsageError(f"--campaign: {path} would be outside --out {out_root}")
    return CampaignDir(path)


def refresh_arms(campaign: CampaignDir, record: CampaignRecord, keys: Sequence[str]) -> None:
    """campaign.json's arm list from the run.json files (the run directories are the truth)."""
    arms = []
    for key in keys:
        rec = campaign.run(key).record_or_none()
        if rec is not None:
            arms.append(ArmStatus.of(rec))
    record.arms = arms
    campaign.write(record)


def dry_run_entries(planned: list[PlannedRun], campaign: CampaignDir) -> list[DryRunEntry]:
    entries = []
    for p in planned:
        runner = get_runner(p.spec.runner)
        launch = runner.prepare(p.spec, campaign.run(p.spec.key).path, dry_run=True)
        entries.append(
            DryRunEntry(
                key=p.spec.key,
                action=p.action,
                why=p.why,
                preflight=runner.preflight(p.spec),
                command=launch.command,
                env={**p.spec.env, **launch.env},
            )
        )
    return entries


def _check_options(
    scenario: Scenario,
    kind: str,
    seeds: Sequence[int] | None,
    slurm_overrides: dict | None,
    resubmit_failed: int,
) -> SlurmBlock | None:
    """Every flag checked before anything is written; the Slurm block with the flags applied."""
    for seed in seeds or ():
        check_seed(seed, "--seeds")
    if kind not in executor_names():
        raise UsageError(f"--executor: unknown executor {kind!r} (one of: {', '.join(executor_names())})")
    if resubmit_failed < 0:
        raise UsageError(f"--resubmit-failed: must be 0 or more (got {resubmit_failed})")
    slurm = scenario.executor.slurm
    if slurm_overrides:
        try:
            slurm = slurm.model_validate({**slurm.model_dump(), **slurm_overrides})
        except ValidationError as err:
            first = err.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "?"
            flag = SLURM_FLAGS.get(name, name)
            raise UsageError(f"{flag}: {first['msg']} (got {first.get('input')!r})") from None
    return slurm


SLURM_FLAGS = {
    "partition": "--slurm-partition",
    "account": "--slurm-account",
    "time_min": "--slurm-time-min",
    "gpus_per_node": "--slurm-gpus",
}


def _check_out_root(out_root: Path) -> None:
    p = Path(out_root)
    for parent in (p, *p.parents):
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--out: {parent} is not a folder")
            break


def _repair(campaign: CampaignDir, planned: list[PlannedRun], outcome: CampaignOutcome, say) -> None:
    """Before anything runs (lock held): damaged run.json moved aside; runs left running by a
    harness that is gone marked interrupted (stale), their runner stopped if it is still there."""
    planned_keys = {p.spec.key for p in planned}
    for run in campaign.runs():
        rec = None if run.key in planned_keys else run.record_or_none()
        if rec is None:
            continue  # planned ones below; damaged unselected ones are left to the user
        why = stale_reason(rec)
        if why:
            _mark_stale(run, rec, why, outcome, say)
    for p in planned:
        run = campaign.run(p.spec.key)
        if p.repair == "corrupt" and run.run_json.exists():
            problem = run.damage() or "unreadable"
            aside = move_aside(run.run_json)
            line = f"note: {p.spec.key}: run.json unreadable ({problem}); moved to {aside.name}; re-run"
            outcome.notes.append(line)
            say(line)
        elif p.repair == "stale":
            rec = run.record()
            _mark_stale(run, rec, stale_reason(rec) or "interrupted (stale)", outcome, say)


def _mark_stale(run: RunDir, rec: RunRecord, why: str, outcome: CampaignOutcome, say) -> None:
    if stop_orphan(rec):
        why += "; its runner was still running and has been stopped"
    rec.status, rec.reason = RunStatus.interrupted, why
    rec.ended_at = rec.ended_at or utcnow()
    run.write(rec)
    line = f"note: {run.key}: {why}"
    outcome.notes.append(line)
    say(line)


def _campaign_record_base(campaign: CampaignDir, outcome: CampaignOutcome, say) -> CampaignRecord | None:
    """The existing campaign.json, or None; a damaged one is moved aside (and said so)."""
    if not campaign.campaign_json.exists():
        return None
    try:
        return campaign.record()
    except HarnessError as err:
        aside = move_aside(campaign.campaign_json)
        line = f"note: campaign.json unreadable ({err}); moved to {aside.name}; written anew"
        outcome.notes.append(line)
        say(line)
        return None


def _read_records(campaign: CampaignDir, keys: Sequence[str], outcome: CampaignOutcome) -> list[RunRecord]:
    records = []
    for k in keys:
        run = campaign.run(k)
        if not run.exists():
            continue
        try:
            records.append(run.record())
        except HarnessError as err:
            outcome.damaged.append(str(err))
    return records


@dataclass
class CampaignPlan:
    """A campaign after every input was checked: nothing is written to make one."""

    scenario: Scenario
    path: Path
    profile: str | None
    kind: str
    slurm: SlurmBlock | None
    specs: list[RunSpec]
    campaign: CampaignDir
    notes: list[str]
    force: bool = False
    resubmit_failed: int = 0


def plan_campaign(
    scenario_ref: str | Path,
    *,
    profile: str | None = None,
    arms: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    out_root: Path = Path("reports"),
    campaign_id: str | None = None,
    executor: str | None = None,
    slurm_overrides: dict | None = None,
    resubmit_failed: int = 0,
    repeats: int | None = None,
    force: bool = False,
    check_executor: bool = True,
) -> CampaignPlan:
    """Check the scenario and every option, and say which runs the campaign has and where.

    ``check_executor``: the Slurm executor must also be reachable from here (a dry run passes
    False: it shows the commands anywhere).
    """
    path = resolve_scenario_path(scenario_ref)
    scenario = load_scenario(path)
    profile = select_profile(scenario, profile)
    kind = executor or scenario.executor.kind
    slurm = _check_options(scenario, kind, seeds, slurm_overrides, resubmit_failed)
    notes = []
    if seeds and len(set(seeds)) != len(seeds):
        dups = sorted({s for s in seeds if list(seeds).count(s) > 1})
        seeds = list(dict.fromkeys(seeds))
        notes.append(f"note: --seeds: {', '.join(map(str, dups))} given more than once; each seed runs once")
    specs = build_plan(scenario, profile=profile, arms=arms, seeds=seeds, repeats=repeats)
    campaign = campaign_dir_for(scenario, out_root, campaign_id, profile)
    _check_out_root(Path(out_root))
    if kind == "slurm" and check_executor:
        from harness.executors.slurm import slurm_unavailable

        why = slurm_unavailable()
        if why:
            raise UsageError(f"{'--executor' if executor else 'executor.kind'} slurm: {why}")
    return CampaignPlan(scenario, path, profile, kind, slurm, specs, campaign, notes, force, resubmit_failed)


def lock_campaign(campaign: CampaignDir) -> CampaignLock:
    """Create the campaign folder and take its lock (CampaignLocked, exit 2, when another run has it)."""
    try:
        campaign.path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out: cannot create {campaign.path} ({err.strerror})") from None
    return CampaignLock(campaign).acquire()


@dataclass
class DryRun:
    """What a run of the plan would do, run by run; nothing is written to make it."""

    campaign: CampaignDir
    entries: list[DryRunEntry]
    notes: list[str]
    held_by: LockHolder | None  # the harness run that holds the campaign now


def dry_run(plan: CampaignPlan) -> DryRun:
    """The plan shown: each run's action and exact command (the plan's notes first)."""
    outcome = run_campaign(plan.path, plan=plan, force=plan.force, dry_run=True)
    return DryRun(outcome.campaign, outcome.dry_run, outcome.notes, outcome.held_by)


def execute(
    plan: CampaignPlan, *, lock: CampaignLock, reporter: Reporter | None = None, report: bool = True
) -> CampaignOutcome:
    """Run the plan under ``lock`` (from ``lock_campaign``; released at the end), then report."""
    return run_campaign(
        plan.path, plan=plan, lock=lock, force=plan.force, report=report, reporter=reporter,
        resubmit_failed=plan.resubmit_failed,
    )  # fmt: skip


def run_campaign(
    scenario_ref: str | Path,
    *,
    profile: str | None = None,
    arms: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    out_root: Path = Path("reports"),
    campaign_id: str | None = None,
    force: bool = False,
    dry_run: bool = False,
    executor: str | None = None,
    report: bool = True,
    reporter: Reporter | None = None,
    slurm_overrides: dict | None = None,
    resubmit_failed: int = 0,
    repeats: int | None = None,
    lock: CampaignLock | None = None,
    plan: CampaignPlan | None = None,
) -> CampaignOutcome:
    """Plan, check every input, then (unless ``dry_run``) run the campaign under its lock and report.

    Nothing is written before every input has been checked; a second run on the same campaign
    raises CampaignLocked at once. ``lock``: the campaign's lock, already taken with
    ``lock_campaign`` (it is released at the end); default: taken here. ``plan``: the campaign
    already planned with ``plan_campaign`` (the planning arguments are then not used).
    """
    reporter = reporter or Reporter()
    if plan is None:
        plan = plan_campaign(
            scenario_ref, profile=profile, arms=arms, seeds=seeds, out_root=out_root, campaign_id=campaign_id,
            executor=executor, slurm_overrides=slurm_overrides, resubmit_failed=resubmit_failed,
            check_executor=not dry_run, repeats=repeats,
        )  # fmt: skip
    campaign = plan.campaign
    outcome = CampaignOutcome(campaign, notes=list(plan.notes))
    for line in plan.notes:
        reporter.message(line)
    if dry_run:
        outcome.held_by = lock_holder(campaign)
        outcome.planned = plan_actions(
            campaign, plan.specs, force=force, held_elsewhere=outcome.held_by is not None
        )
        outcome.dry_run = dry_run_entries(outcome.planned, campaign)
        return outcome

    if lock is None:
        lock = lock_campaign(campaign)
    elif lock.campaign.path != campaign.path or lock.fd is None:
        raise ValueError(f"run_campaign: the lock given is not held on {campaign.path}")
    with lock:
        if lock.took_over is not None:
            line = (
                f"note: the campaign lock was left by {lock.took_over.describe()}, which is gone; taken over"
            )
            outcome.notes.append(line)
            reporter.message(line)
        _run_locked(plan, force, report, reporter, resubmit_failed, outcome)
    return outcome


def _run_locked(
    plan: CampaignPlan,
    force: bool,
    report: bool,
    reporter: Reporter,
    resubmit_failed: int,
    outcome: CampaignOutcome,
) -> None:
    scenario, path, profile, specs = plan.scenario, plan.path, plan.profile, plan.specs
    campaign, kind, slurm = plan.campaign, plan.kind, plan.slurm
    planned = plan_actions(campaign, specs, force=force)
    outcome.planned = planned
    _repair(campaign, planned, outcome, reporter.message)
    previous = _campaign_record_base(campaign, outcome, reporter.message)
    fp = fingerprint(
        {k: str(v) for k, v in scenario.env.items()},
        extra_repos={"lightx2v": scenario.lightx2v.root} if scenario.lightx2v else None,
    )
    resolved = scenario.model_dump(mode="json")
    record = CampaignRecord(
        campaign_id=campaign.path.name,
        scenario_name=scenario.name,
        scenario_file=str(path),
        scenario_sha256=sha256_file(path),
        scenario=resolved,
        profile=profile,
        runner=scenario.runner,
        executor=kind,
        created_at=previous.created_at if previous else utcnow(),
        harness_version=__version__,
        env=fp,
    )
    record.scenario["_hash"] = canonical_hash(resolved)
    keys = [s.key for s in specs]
    refresh_arms(campaign, record, keys)

    def on_record(rec: RunRecord) -> None:
        outcome.ran.add(rec.spec.key)
        refresh_arms(campaign, record, keys)

    options = {}
    if kind == "slurm":
        options = {"slurm": slurm, "resubmit_failed": resubmit_failed}
    try:
        get_executor(kind, **options).run(campaign, planned, reporter, on_record)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        refresh_arms(campaign, record, keys)
    outcome.records = _read_records(campaign, keys, outcome)
    if report and not outcome.interrupted:
        from harness.report import build_report

        try:
            outcome.report_paths = build_report(campaign)
        except HarnessError as err:
            outcome.report_error = f"report failed: {err}"
        except Exception as err:  # the runs are safe on disk; say what broke and keep going
            outcome.report_error = f"report failed: {type(err).__name__}: {err}"
