"""Plan: a scenario x selected arms x seeds x profile -> the list of run specs, and their status."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import ScenarioError
from harness.records import RunRecord, RunSpec, RunStatus, role_rank
from harness.runners import get_runner
from harness.store import CampaignDir

if TYPE_CHECKING:
    from harness.scenario import Scenario


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
) -> list[RunSpec]:
    """One RunSpec per (arm, seed, repeat), arms in scenario order, the reference first.

    Repeats are interleaved: every arm's first run of every seed, then every arm's second run,
    ... (A B C A B C), so a drift of the machine over the campaign spreads over all arms instead
    of landing on the last one. ``repeats`` (the CLI's --repeats) replaces the scenario's; an
    arm's own ``repeats`` wins over both.
    """
    if scenario.kind != "e2e":
        raise ScenarioError(f"scenario {scenario.name} is of kind {scenario.kind!r}; use `harness kernels`")
    profile = select_profile(scenario, profile)
    chosen = [scenario.arm(a) for a in dict.fromkeys(arms)] if arms else list(scenario.arms)
    seed_list = list(dict.fromkeys(seeds)) if seeds else scenario.seed_list
    runner = get_runner(scenario.runner)
    multi = len(seed_list) > 1 or len(scenario.seed_list) > 1
    chosen.sort(key=lambda a: role_rank(a.role))
    if repeats is not None and repeats < 1:
        raise ScenarioError(f"repeats must be 1 or more (got {repeats})")
    default_repeats = repeats if repeats is not None else scenario.repeats
    arm_repeats = {a.name: a.repeats or default_repeats for a in chosen}
    params = {a.name: runner.resolve_params(scenario, a, profile) for a in chosen}
    specs = []
    for repeat in range(1, max(arm_repeats.values(), default=1) + 1):
        for seed in seed_list:
            for arm in chosen:
                if repeat > arm_repeats[arm.name]:
                    continue
                env = {**scenario.env, **{k: str(v) for k, v in arm.env.items()}}
                specs.append(
                    RunSpec(
                        scenario=scenario.name,
                        runner=scenario.runner,
                        arm=arm.name,
                        seed=seed,
                        profile=profile,
                        attn_type=arm.attn_type,
                        kv_reversed=arm.kv_reversed,
                        kv_chunks=arm.kv_chunks,
                        attn_options=dict(arm.attn_options),
                        role=arm.role,
                        params=params[arm.name],
                        env={k: str(v) for k, v in env.items()},
                        timeout_s=scenario.timeout_s,
                        multi_seed=multi,
                        repeat=repeat,
                    )
                )
    return specs


@dataclass
class PlannedRun:
    spec: RunSpec
    action: str  # "run" | "skip-ok" (resume: already ok with the same spec hash) | "rerun"
    why: str
    # Set right before running: "corrupt" (run.json is moved aside) or "stale" (a run.json left
    # running by a harness that is gone is marked interrupted, its runner stopped if still there).
    repair: str | None = None


def plan_actions(
    campaign: CampaignDir, specs: list[RunSpec], *, force: bool = False, held_elsewhere: bool = False
) -> list[PlannedRun]:
    """What a (re-)run of the campaign will do for each spec: resume skips runs already ok.

    The dry run and the real run both ask this, so they agree. ``held_elsewhere``: another
    harness holds the campaign lock, so a run.json that says running is running, not stale.
    """
    from harness.executors.process import stale_reason

    planned = []
    for spec in specs:
        run = campaign.run(spec.key)
        if not run.exists():
            planned.append(PlannedRun(spec, "run", "new"))
            continue
        try:
            rec: RunRecord = run.record()
        except Exception as err:  # an unreadable run.json is re-run, never trusted
            why = f"run.json unreadable, to be moved aside ({err})"
            planned.append(PlannedRun(spec, "rerun", why, repair="corrupt"))
            continue
        same = rec.spec_hash == spec.spec_hash()
        stale = None if held_elsewhere else stale_reason(rec)
        if stale:
            planned.append(PlannedRun(spec, "rerun", stale + (", --force" if force else ""), repair="stale"))
        elif force:
            planned.append(PlannedRun(spec, "rerun", "--force"))
        elif rec.status == RunStatus.ok and same:
            planned.append(PlannedRun(spec, "skip-ok", "already ok, same spec"))
        elif not same:
            planned.append(PlannedRun(spec, "rerun", "spec changed"))
        else:
            planned.append(PlannedRun(spec, "rerun", f"previous status {rec.status.value}"))
    return planned
