"""Plan: a scenario x arms x seeds x profile -> a campaign's run specs, where it lives, what a
(re-)run does with each run (``plan_campaign`` writes nothing) and what a dry run would launch."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.errors import HarnessError, ScenarioError, UsageError
from harness.executors.base import PlannedRun
from harness.records import RunRecord, RunSpec, RunStatus, role_rank, stale_reason
from harness.registry import EXECUTORS
from harness.runners.base import get_runner
from harness.scenario.dose import read_source
from harness.scenario.insitu import insitu_settings, schedule_spec, shadow_specs
from harness.scenario.load import load_scenario, resolve_scenario_path
from harness.scenario.model import RepeatsAuto, Scenario, SlurmBlock, check_name, check_seed
from harness.scenario.plugins import plugins_for
from harness.store import CampaignDir
from harness.writer_lock import LockHolder, lock_holder


def select_profile(scenario: Scenario, profile: str | None) -> str | None:
    if profile is None:
        return scenario.default_profile
    if profile not in scenario.profiles:
        known = ", ".join(scenario.profiles) or "none defined"
        raise ScenarioError(f"scenario {scenario.name}: unknown profile {profile!r} (profiles: {known})")
    return profile


def build_plan(
    scenario: Scenario,
    *,
    profile: str | None = None,
    arms: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    repeats: int | None = None,
    inputs: Sequence[str] | None = None,
) -> list[RunSpec]:
    """One RunSpec per (arm, input, seed, repeat); repeats interleaved in rounds run in alternate orders (A B C,
    C B A, A B C): the reference first in odd rounds (round 1's runs are the ones accuracy compares),
    last in even ones. Reversing, not a seeded shuffle: a drift or warm-up linear in the place within a
    round cancels over every two rounds for every pair of arms, and every plan has the same order.
    ``repeats: auto`` plans its maximum rounds."""
    if scenario.kind != "e2e":
        raise ScenarioError(f"scenario {scenario.name} is of kind {scenario.kind!r}; use `harness kernels`")
    profile = select_profile(scenario, profile)
    by_name = {a.name: a for a in scenario.arms}  # once: a lookup per arm kept planning linear
    chosen = [by_name.get(a) or scenario.arm(a) for a in dict.fromkeys(arms)] if arms else list(scenario.arms)
    seed_list = list(dict.fromkeys(seeds)) if seeds else scenario.seed_list
    runner = get_runner(scenario.runner)
    multi = len(seed_list) > 1 or len(scenario.seed_list) > 1
    chosen.sort(key=lambda a: role_rank(a.role))
    if repeats is not None and repeats < 1:
        raise ScenarioError(f"repeats must be 1 or more (got {repeats})")
    auto = scenario.repeats_auto.max if scenario.repeats == "auto" else int(scenario.repeats)
    default_repeats = repeats if repeats is not None else auto
    arm_repeats = {a.name: a.repeats or default_repeats for a in chosen}
    input_list = list(dict.fromkeys(inputs)) if inputs else scenario.input_list
    named = len(scenario.input_list) > 1  # as with seeds: one input is a campaign's plain sample
    params = {
        (a.name, inp): _input_params(runner, scenario, a, profile, inp) for inp in input_list for a in chosen
    }
    shadows = {a.name: shadow_specs(by_name, a) for a in chosen}
    specs = [
        RunSpec(
            scenario=scenario.name,
            runner=scenario.runner,
            arm=arm.name,
            seed=seed,
            profile=profile,
            input=inp if named else None,
            **arm.choice().model_dump(),
            role=arm.role,
            params=params[arm.name, inp],
            env={k: str(v) for k, v in {**scenario.env, **arm.env}.items()},
            timeout_s=scenario.timeout_s,
            multi_seed=multi,
            repeat=repeat,
            shadows=shadows[arm.name],
            insitu=insitu_settings(arm),
            schedule=schedule_spec(arm),
            plugins=scenario.plugin_refs,
        )
        for repeat in range(1, max(arm_repeats.values(), default=1) + 1)
        for inp in input_list
        for seed in seed_list
        for arm in (chosen if repeat % 2 else chosen[::-1])
        if repeat <= arm_repeats[arm.name]
    ]
    specs = with_code(runner, specs, scenario._sources_digest)
    # each arm's process imports the plugins whose backends it calls, no other (a plugin cannot reach
    # the reference that way), and its spec holds their digests: an edited plugin re-runs those arms
    specs = [
        s.model_copy(update={"plugins": plugins_for(s.plugins, runner.harness_backends(s))}) for s in specs
    ]
    runner.expect_preflights(specs)
    return specs


def _input_params(runner: Any, scenario: Scenario, arm: Any, profile: str | None, inp: str | None) -> Any:
    """The arm's runner parameters for one input; a parameter only the input brings names it."""
    try:
        return runner.resolve_params(scenario.for_input(inp), arm, profile)
    except HarnessError as err:
        if inp is not None:
            runner.resolve_params(scenario, arm, profile)  # fails alike: the input is not the cause
            raise ScenarioError(f"scenario {scenario.name}: inputs.{inp}: {err}") from None
        raise


def with_code(runner: Any, specs: list[RunSpec], sources: str = "") -> list[RunSpec]:
    """Each spec with the digest of the code of every backend its run calls (``source_digests``)."""
    names = {id(s): runner.harness_backends(s) for s in specs}
    if not any(names.values()):
        return specs
    from harness.attention.registry import source_digests

    digests = source_digests({n for ns in names.values() for n in ns}, sources)
    return [s.model_copy(update={"code": {n: digests[n] for n in names[id(s)]}}) for s in specs]


def plan_actions(
    campaign: CampaignDir, specs: list[RunSpec], *, force: bool = False, held_elsewhere: bool = False
) -> list[PlannedRun]:
    """What a (re-)run (and its dry run) does with each spec; ``held_elsewhere``: another harness holds
    the lock, so a run.json that says running is not stale."""
    planned = []
    for spec in specs:
        run = campaign.run(spec.key)
        if not run.exists():
            planned.append(PlannedRun(spec, "run", "new"))
            continue
        try:
            rec: RunRecord = run.record()
        except (HarnessError, OSError) as err:  # unreadable, or of a schema this harness does not read
            why = f"run.json unreadable, to be moved aside ({err})"
            planned.append(PlannedRun(spec, "rerun", why, repair="corrupt"))
            continue
        same = rec.spec_hash == spec.spec_hash()
        stale = None if held_elsewhere else stale_reason(rec)
        if stale:
            planned.append(PlannedRun(spec, "rerun", stale + (", --force" if force else ""), repair="stale"))
        elif rec.status == RunStatus.ok and same and not force:
            planned.append(PlannedRun(spec, "skip-ok", "already ok, same spec"))
        else:
            why = "--force" if force else f"previous status {rec.status.value}" if same else "spec changed"
            planned.append(PlannedRun(spec, "rerun", why))
    return planned


# --- a campaign's plan -------------------------------------------------------------------------


@dataclass
class Plan:
    """A campaign after every input was checked: nothing is written to make one."""

    scenario: Scenario
    path: Path | None  # the scenario file (None: planned from a Scenario object)
    profile: str | None
    executor: str
    slurm: SlurmBlock | None
    resubmit_failed: int
    force: bool
    specs: list[RunSpec]
    campaign: CampaignDir
    notes: list[str] = field(default_factory=list)  # one line each (de-duplicated seeds)
    auto: RepeatsAuto | None = None  # repeats: auto (and no --repeats): rounds until the intervals are narrow
    dose_source: dict | None = None  # what the run keeps of dose_response_from's file (read once, here)

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self.specs]

    def actions(self, *, held_elsewhere: bool = False) -> list[PlannedRun]:
        """What running the plan now does with each run (asked again right before running)."""
        return plan_actions(self.campaign, self.specs, force=self.force, held_elsewhere=held_elsewhere)


SLURM_FLAGS = {
    "partition": "--slurm-partition",
    "account": "--slurm-account",
    "time_min": "--slurm-time-min",
    "gpus_per_node": "--slurm-gpus",
}


def campaign_dir_for(
    scenario: Scenario, out_root: Path, campaign_id: str | None, profile: str | None
) -> CampaignDir:
    """reports/<scenario>/<campaign-id>, checked names; the id defaults to the profile (a re-run resumes)."""
    cid = campaign_id if campaign_id is not None else (profile or "default")
    check_name(cid, "--campaign" if campaign_id is not None else "campaign id")
    check_name(scenario.name, "scenario name")
    path = Path(out_root) / scenario.name / cid
    if os.path.relpath(os.path.normpath(path), os.path.normpath(out_root)).startswith(".."):
        raise UsageError(f"--campaign: {path} would be outside --out {out_root}")
    return CampaignDir(path)


def plan_campaign(
    scenario: str | Path | Scenario,
    *,
    profile: str | None = None,
    arms: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    inputs: Sequence[str] | None = None,
    out_root: Path = Path("reports"),
    campaign_id: str | None = None,
    executor: str | None = None,
    slurm_overrides: dict | None = None,
    resubmit_failed: int = 0,
    repeats: int | str | None = None,
    force: bool = False,
    check_executor: bool = True,
) -> Plan:
    """Check the scenario and every option; the campaign's runs and where (nothing written).
    ``check_executor``: refuse an executor that cannot start runs here (a dry run passes False);
    ``repeats="auto"``: as the scenario's ``repeats: auto`` (and recorded so)."""
    path = None if isinstance(scenario, Scenario) else resolve_scenario_path(scenario)
    loaded = scenario if path is None else load_scenario(path)
    if repeats == "auto":
        loaded, repeats = loaded.model_copy(update={"repeats": "auto"}), None
    profile = select_profile(loaded, profile)
    kind = executor or loaded.executor.kind
    for seed in seeds or ():
        check_seed(seed, "--seeds")
    if kind not in EXECUTORS:
        raise UsageError(f"--executor: {EXECUTORS.unknown_message(kind)}")
    if resubmit_failed < 0:
        raise UsageError(f"--resubmit-failed: must be 0 or more (got {resubmit_failed})")
    slurm = loaded.executor.slurm
    if slurm_overrides:
        try:
            slurm = slurm.model_validate({**slurm.model_dump(), **slurm_overrides})
        except ValidationError as err:
            first = err.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "?"
            raise UsageError(
                f"{SLURM_FLAGS.get(name, name)}: {first['msg']} (got {first.get('input')!r})"
            ) from None
    notes = []
    if seeds and len(set(seeds)) != len(seeds):
        dups = sorted({s for s in seeds if list(seeds).count(s) > 1})
        notes.append(f"note: --seeds: {', '.join(map(str, dups))} given more than once; each seed runs once")
    dose_source, why = read_source(loaded.dose_response_from) if loaded.dose_response_from else (None, "")
    if why:
        raise UsageError(why)
    unknown = [i for i in inputs or () if i not in (loaded.inputs or {})]
    if unknown:
        known = ", ".join(loaded.inputs or {}) or "the scenario lists none"
        raise UsageError(f"--inputs: no input named {unknown[0]!r} (inputs: {known})")
    specs = build_plan(loaded, profile=profile, arms=arms, seeds=seeds, repeats=repeats, inputs=inputs)
    campaign = campaign_dir_for(loaded, out_root, campaign_id, profile)
    nearest = next((f for f in (Path(out_root), *Path(out_root).parents) if f.exists()), None)
    if nearest is not None and not nearest.is_dir():
        raise UsageError(f"--out: {nearest} is not a folder")
    if check_executor and kind == "slurm":
        from harness.executors.slurm import slurm_unavailable

        why = slurm_unavailable()
        if why:
            raise UsageError(f"{'--executor' if executor else 'executor.kind'} slurm: {why}")
    auto = loaded.repeats_auto if loaded.repeats == "auto" and repeats is None else None
    return Plan(
        loaded, path, profile, kind, slurm, resubmit_failed, force, specs, campaign, notes, auto, dose_source
    )


# --- a dry run -----------------------------------------------------------------------------------


@dataclass
class DryRunEntry:
    key: str
    action: str
    why: str
    preflight: str | None  # why the run would be skipped here, or None
    command: list[str]
    env: dict[str, str]

    def shell(self) -> str:
        """The exact command with its variables, one line to copy."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.command)


@dataclass
class DryRun:
    campaign: CampaignDir
    entries: list[DryRunEntry]
    notes: list[str]
    held_by: LockHolder | None  # the harness run that holds the campaign now, if any


def dry_run(plan: Plan) -> DryRun:
    """What running the plan would launch, run by run; nothing is written or started."""
    held_by = lock_holder(plan.campaign)
    entries = []
    for p in plan.actions(held_elsewhere=held_by is not None):
        runner = get_runner(p.spec.runner)
        launch = runner.prepare(p.spec, plan.campaign.run(p.spec.key).path, dry_run=True)
        env = {**p.spec.env, **launch.env}
        entries.append(
            DryRunEntry(p.spec.key, p.action, p.why, runner.preflight(p.spec), launch.command, env)
        )
    return DryRun(plan.campaign, entries, list(plan.notes), held_by)
