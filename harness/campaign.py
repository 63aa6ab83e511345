"""A campaign: plan the runs of a scenario, execute them, keep campaign.json current, report.

This is the library function behind `harness run`; the CLI only parses options and shows progress.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness import __version__
from harness.envinfo import fingerprint
from harness.executors.base import Reporter
from harness.executors.registry import get_executor
from harness.plan import PlannedRun, build_plan, plan_actions, select_profile
from harness.records import RunRecord, RunStatus, canonical_hash
from harness.runners import get_runner
from harness.scenario import Scenario, load_scenario, resolve_scenario_path
from harness.store import ArmStatus, CampaignDir, CampaignRecord, sha256_file, utcnow


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

    @property
    def failed(self) -> list[RunRecord]:
        return [r for r in self.records if r.status not in (RunStatus.ok, RunStatus.skipped)]


def campaign_dir_for(
    scenario: Scenario, out_root: Path, campaign_id: str | None, profile: str | None
) -> CampaignDir:
    """reports/<scenario>/<campaign-id>; the id defaults to the profile, so a re-run resumes."""
    return CampaignDir(Path(out_root) / scenario.name / (campaign_id or profile or "default"))


def _arm_status(rec: RunRecord) -> ArmStatus:
    s = rec.spec
    return ArmStatus(
        key=s.key,
        arm=s.arm,
        seed=s.seed,
        role=s.role.value,
        attn_type=s.attn_type,
        kv_reversed=s.kv_reversed,
        status=rec.status,
        reason=rec.reason,
        valid=rec.valid,
        repeat=s.repeat,
    )


def refresh_arms(campaign: CampaignDir, record: CampaignRecord, keys: Sequence[str]) -> None:
    """campaign.json's arm list from the run.json files (the run directories are the truth)."""
    arms = []
    for key in keys:
        run = campaign.run(key)
        if run.exists():
            arms.append(_arm_status(run.record()))
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
) -> CampaignOutcome:
    reporter = reporter or Reporter()
    path = resolve_scenario_path(scenario_ref)
    scenario = load_scenario(path)
    profile = select_profile(scenario, profile)
    specs = build_plan(scenario, profile=profile, arms=arms, seeds=seeds, repeats=repeats)
    campaign = campaign_dir_for(scenario, out_root, campaign_id, profile)
    planned = plan_actions(campaign, specs, force=force)
    outcome = CampaignOutcome(campaign)
    if dry_run:
        outcome.dry_run = dry_run_entries(planned, campaign)
        return outcome

    kind = executor or scenario.executor.kind
    record = campaign.record() if campaign.exists() else None
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
        created_at=record.created_at if record else utcnow(),
        harness_version=__version__,
        env=fp,
    )
    record.scenario["_hash"] = canonical_hash(resolved)
    keys = [s.key for s in specs]
    campaign.path.mkdir(parents=True, exist_ok=True)
    refresh_arms(campaign, record, keys)

    def on_record(rec: RunRecord) -> None:
        refresh_arms(campaign, record, keys)

    options = {}
    if kind == "slurm":
        slurm = scenario.executor.slurm
        if slurm_overrides:
            slurm = slurm.model_validate({**slurm.model_dump(), **slurm_overrides})
        options = {"slurm": slurm, "resubmit_failed": resubmit_failed}
    try:
        get_executor(kind, **options).run(campaign, planned, reporter, on_record)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        refresh_arms(campaign, record, keys)
    outcome.records = [campaign.run(k).record() for k in keys if campaign.run(k).exists()]
    if report and not outcome.interrupted:
        from harness.report import build_report

        try:
            outcome.report_paths = build_report(campaign)
        except Exception as err:  # the runs are safe on disk; say what broke and keep going
            outcome.report_error = f"report failed: {err}"
    return outcome
