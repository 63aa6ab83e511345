"""``harness ingest``: a campaign created or extended from outputs made anywhere (flags or manifest)."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.common import fail_on_report_errors, print_paths, waiting_line
from harness.errors import UsageError

EPILOG = (
    "Examples: harness ingest reports/h3/pr --arm torch_sdpa --role reference --mp4 sdpa.mp4 "
    "--log rank0.log --log rank1.log --config h3.json --seed 42   |   harness ingest manifest.yaml"
)


def ingest(
    target: Path = typer.Argument(
        ..., help="A manifest (.yaml) of several arms, or the campaign folder to create or extend."
    ),
    arm: str | None = typer.Option(None, help="Arm name (one arm from the flags below)."),
    mp4: Path | None = typer.Option(None, help="The arm's output mp4."),
    log: list[Path] = typer.Option(
        [], "--log", help="A LightX2V log: once per rank, or one interleaved torchrun log."
    ),
    config: Path | None = typer.Option(None, help="The config JSON the run used (seed, attn_type read)."),
    role: str = typer.Option("candidate", help="reference, noise_floor or candidate."),
    seed: int | None = typer.Option(None, help="Seed (default: the config's, else LightX2V's 42)."),
    repeat: int | None = typer.Option(None, min=1, help="Repeat number of this arm and seed (default 1)."),
    attn_type: str | None = typer.Option(None, "--attn-type", help="Attention type (default: the config's)."),
    gpu: str | None = typer.Option(None, help="Where it ran, free text (shown in history)."),
    scenario: str | None = typer.Option(
        None, help="Scenario name of a new campaign (default: parent folder)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace arms already in the campaign."),
    build: bool = typer.Option(False, "--report", help="Build the campaign's report afterwards."),
):
    """Create or extend a campaign from existing outputs (mp4, LightX2V logs, config) made anywhere."""
    from harness.ingest import IngestArm, load_manifest
    from harness.ingest import ingest as do_ingest
    from harness.records import Role
    from harness.scenario.model import check_name, check_seed

    if target.suffix.lower() in (".yaml", ".yml"):
        given = [f"--{n}" for n, v in (("arm", arm), ("mp4", mp4), ("config", config), ("log", log)) if v]
        if given:
            raise UsageError(f"{given[0]}: not with a manifest ({target} lists the arms)")
        man = load_manifest(target)
        folder, arms, scenario = man.campaign, man.arms, man.scenario
    else:
        if arm is None or mp4 is None:
            raise UsageError(f"{'--arm' if arm is None else '--mp4'}: required (or give a manifest.yaml)")
        if role not in Role.__members__:
            raise UsageError(f"--role: expected reference, noise_floor or candidate (got {role!r})")
        check_name(arm, "--arm")
        if scenario is not None:
            check_name(scenario, "--scenario")
        if seed is not None:
            check_seed(seed, "--seed")
        folder = target
        arms = [IngestArm(name=arm, mp4=mp4, logs=log, config=config, role=Role(role), seed=seed,
                          repeat=repeat, attn_type=attn_type, gpu=gpu)]  # fmt: skip
    with ingest_lock(Path(folder)):
        result = do_ingest(folder, arms, scenario=scenario, force=force)
        for line in result.lines:
            print(line)
        print(f"campaign: {result.campaign}")
        if not build:
            print(f"next: harness report {result.campaign}")
            return
        from harness.report import build_report
        from harness.store import CampaignDir

        # Under the ingest's lock when it took one (no other writer between the two).
        camp = CampaignDir(Path(result.campaign))
        paths = build_report(camp, on_wait=waiting_line(camp.path, "the report is built"))
    print_paths(paths)
    fail_on_report_errors(paths)


def ingest_lock(folder: Path):
    """The writer lock for an ingest into an existing campaign (not a new one: campaign.lock would make
    it not empty); one that cannot be written: exit 2."""
    import contextlib

    from harness.safe_write import check_writable_dir
    from harness.store import CampaignDir
    from harness.writer_lock import CampaignLock

    camp = CampaignDir(folder)
    if not (camp.exists() or camp.lock_file.exists()):
        return contextlib.nullcontext()
    check_writable_dir(camp.path, "campaign")  # read-only or not ours: exit 2, as ingest says it
    return CampaignLock(camp, "ingest", waiting_line(camp.path, "the ingest goes on")).acquire()
