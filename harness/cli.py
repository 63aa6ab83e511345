"""The `harness` command: a thin typer layer; every command calls one library function."""

from __future__ import annotations

import harness.cli_startup  # noqa: F401  (first: a quiet Ctrl-C while the rest loads)

# isort: split
import json
import signal
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.errors import EXIT_CODES_HELP, Exit, HarnessError, UsageError

# Groups do not use typer's no_args_is_help: what it does differs between typer/click versions
# (help and exit 0, or an error and exit 2); the callbacks below make it one usage line, exit 2.
app = typer.Typer(
    add_completion=False,
    invoke_without_command=True,
    rich_markup_mode="rich",
    help="A/B benchmark and accuracy harness for attention backends in video+audio generation.",
    epilog=EXIT_CODES_HELP,
)
scenarios_app = typer.Typer(
    invoke_without_command=True, help="List, validate and describe scenario files.", epilog=EXIT_CODES_HELP
)
bench_app = typer.Typer(
    invoke_without_command=True, help="Benchmarks of the harness itself.", epilog=EXIT_CODES_HELP
)
app.add_typer(scenarios_app, name="scenarios")
app.add_typer(bench_app, name="bench")
lightx2v_app = typer.Typer(
    invoke_without_command=True,
    help="Tools for the real LightX2V (synthetic checkpoint, overhead).",
    epilog=EXIT_CODES_HELP,
)
app.add_typer(lightx2v_app, name="lightx2v")
diffusers_app = typer.Typer(
    invoke_without_command=True,
    help="Tools for the diffusers runner (synthetic pipelines, the backend pre-flight).",
    epilog=EXIT_CODES_HELP,
)
app.add_typer(diffusers_app, name="diffusers")


def _need_subcommand(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None and not ctx.resilient_parsing:
        names = ", ".join(sorted(ctx.command.list_commands(ctx)))
        raise UsageError(f"{ctx.command_path}: a command is required (one of: {names}; see --help)")


for _group in (app, scenarios_app, bench_app, lightx2v_app, diffusers_app):
    _group.callback()(_need_subcommand)

out = Console()
err = Console(stderr=True)


def say_err(text: str) -> None:
    """One plain line on stderr (never wrapped or styled: it is meant to be grepped)."""
    print(text, file=sys.stderr, flush=True)


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _seeds(value: str | None) -> list[int] | None:
    """--seeds 1,2,3: integers in [0, 2^32); anything else is a usage error naming the flag."""
    items = _csv(value)
    if value is not None and not items:
        raise UsageError(f"--seeds: no seed given in {value!r} (expected e.g. 42 or 42,43)")
    seeds = []
    for item in items or ():
        try:
            seeds.append(int(item, 10))
        except ValueError:
            raise UsageError(f"--seeds: {item!r} is not an integer (expected e.g. 42 or 42,43)") from None
    return seeds or None


class RichReporter:
    """Progress over arms and over the steps of the arm that runs."""

    def __init__(self, progress: Progress, total: int):
        self.progress = progress
        self.arms = progress.add_task("arms", total=total)
        self.steps = None

    def run_started(self, spec, index, total):
        self.progress.update(self.arms, total=total, description=f"arm {spec.key}")
        if self.steps is not None:
            self.progress.remove_task(self.steps)
        self.steps = self.progress.add_task("  steps", total=None)

    def run_progress(self, step, steps):
        if self.steps is not None:
            self.progress.update(self.steps, completed=step, total=steps)

    def run_finished(self, record):
        self.progress.advance(self.arms)
        if self.steps is not None:  # the step bar belongs to the arm that just ended
            self.progress.remove_task(self.steps)
            self.steps = None
        mark = {"ok": "[green]ok[/]", "skipped": "[yellow]skipped[/]"}.get(record.status.value)
        mark = mark or f"[red]{record.status.value}[/]"
        extra = f" - {escape(record.reason)}" if record.reason else ""
        self.progress.console.print(f"  {record.spec.key}: {mark}{extra}", markup=True, highlight=False)

    def message(self, text):
        self.progress.console.print(text, soft_wrap=True, markup=False, highlight=False)  # one line


def _summary_table(outcome) -> Table:
    """One row per run; a "from" column when some rows were not made by this invocation."""
    table = Table(title=f"campaign {outcome.campaign.path}", title_justify="left")
    mixed = any(rec.spec.key not in outcome.ran for rec in outcome.records)
    for col in ("run", "role", "status", "valid", "s/step", "total s") + (("from",) if mixed else ()):
        table.add_column(col, no_wrap=True)
    for rec in outcome.records:
        timing = None
        try:
            timing = outcome.campaign.run(rec.spec.key).timing()
        except HarnessError:
            pass
        sps = f"{timing.s_per_step:.4f}" if timing and timing.s_per_step is not None else "-"
        tot = f"{timing.pipeline_total_s:.2f}" if timing and timing.pipeline_total_s is not None else "-"
        valid = "-" if rec.valid is None else ("yes" if rec.valid else "NO")
        row = [rec.spec.key, rec.spec.role.value, rec.status.value, valid, sps, tot]
        table.add_row(*row, *([outcome.provenance(rec.spec.key)] if mixed else []))
    return table


def _notes(outcome) -> list[str]:
    return [f"{r.spec.key}: {r.reason}" for r in outcome.records if r.reason]


@app.command(
    epilog="Example: harness run scenarios/e2e_3step.yaml --profile 3step   "
    "(resumes: arms already ok with the same spec are skipped; --force re-runs them)"
)
def run(
    scenario: str = typer.Argument(..., help="Scenario YAML file (or a name under scenarios/)."),
    profile: str | None = typer.Option(None, "--profile", "-p", help="Profile from the scenario."),
    arms: str | None = typer.Option(None, help="Comma-separated arm names (default: all)."),
    seeds: str | None = typer.Option(None, help="Comma-separated seeds (default: the scenario's)."),
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Root folder of campaigns."),
    campaign: str | None = typer.Option(None, help="Campaign id (default: the profile name)."),
    force: bool = typer.Option(False, "--force", help="Re-run arms that are already ok."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show exactly what would run, run nothing."),
    executor: str | None = typer.Option(None, help="local or slurm (default: the scenario's)."),
    no_report: bool = typer.Option(False, "--no-report", help="Skip building the report."),
    partition: str | None = typer.Option(None, "--slurm-partition", help="Slurm partition (slurm executor)."),
    account: str | None = typer.Option(None, "--slurm-account", help="Slurm account (slurm executor)."),
    time_min: int | None = typer.Option(None, "--slurm-time-min", help="Slurm time limit per arm, minutes."),
    gpus: int | None = typer.Option(None, "--slurm-gpus", help="GPUs per arm job (default: the runner's)."),
    resubmit_failed: int = typer.Option(0, "--resubmit-failed", help="Slurm: resubmit failed arms N times."),
    repeats: int | None = typer.Option(
        None, "--repeats", min=1, help="Runs per arm and seed, interleaved (default: the scenario's repeats)."
    ),
):
    """Run a scenario's arms (a campaign), then write its report."""
    from harness.campaign import run_campaign

    seed_list = _seeds(seeds)
    given = {"partition": partition, "account": account, "time_min": time_min, "gpus_per_node": gpus}
    slurm_overrides = {k: v for k, v in given.items() if v is not None}
    if dry_run:
        outcome = run_campaign(
            scenario, profile=profile, arms=_csv(arms), seeds=seed_list, out_root=out_dir,
            campaign_id=campaign, force=force, dry_run=True, executor=executor,
            slurm_overrides=slurm_overrides, resubmit_failed=resubmit_failed, repeats=repeats,
        )  # fmt: skip
        # Plain lines, never wrapped: the commands are meant to be copied.
        print(f"campaign: {outcome.campaign.path}  (dry run: nothing is executed)")
        for note in outcome.notes:
            print(note)
        if outcome.held_by is not None:
            print(
                f"note: another harness run holds this campaign ({outcome.held_by.describe()}); "
                "a real run now would exit 2"
            )
        for e in outcome.dry_run:
            note = f"  [would be skipped: {e.preflight}]" if e.preflight else ""
            print(f"\n# {e.key}: {e.action} ({e.why}){note}")
            print(e.shell())
        return
    from harness.campaign import lock_campaign, plan_campaign

    # Every bad input, and a campaign another run holds, is one line before any progress bar.
    plan = plan_campaign(
        scenario,
        profile=profile,
        arms=_csv(arms),
        seeds=seed_list,
        out_root=out_dir,
        campaign_id=campaign,
        executor=executor,
        slurm_overrides=slurm_overrides,
        resubmit_failed=resubmit_failed,
        repeats=repeats,
    )
    lock = lock_campaign(plan.campaign)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    ) as progress:
        reporter = RichReporter(progress, total=0)
        outcome = run_campaign(
            scenario, plan=plan, lock=lock, force=force, report=not no_report, reporter=reporter,
            resubmit_failed=resubmit_failed,
        )  # fmt: skip
    out.print(_summary_table(outcome))
    for note in _notes(outcome):
        out.print(note, highlight=False, markup=False, soft_wrap=True)
    if outcome.report_paths is not None:
        for label, path in outcome.report_paths.items():
            out.print(f"{label}: {path}", highlight=False)
    if outcome.interrupted:
        err.print("interrupted: finished runs are kept; run the same command again to resume")
        raise typer.Exit(Exit.INTERRUPTED)
    problems = [f"{p}" for p in outcome.damaged]
    problems += list(getattr(outcome.report_paths, "errors", ()))
    if outcome.report_error:
        problems.append(outcome.report_error)
    for problem in problems:
        say_err(f"error: {problem}")
    if outcome.failed:
        say_err(
            f"{len(outcome.failed)} run(s) did not finish ok or are invalid: "
            + ", ".join(r.spec.key for r in outcome.failed)
        )
    if outcome.failed or problems:
        raise typer.Exit(Exit.RUN_FAILED)


@app.command(
    epilog="Example: harness compare reports/e2e_3step/3step:torch_sdpa reports/e2e_3step/3step:sage_emul_aiter"
)
def compare(
    run_a: str = typer.Argument(..., help="Reference: a run directory, CAMPAIGN:ARM or an mp4 file."),
    run_b: str = typer.Argument(
        ..., help="Compared against A: a run directory, CAMPAIGN:ARM or an mp4 file."
    ),
    fmt: str = typer.Option("table", "--format", "-f", help="table, md or json."),
    gate: Path | None = typer.Option(
        None,
        help="YAML/JSON thresholds (schema: harness scenarios schema --gate); exit 1 when one is violated.",
    ),
    truncate: bool = typer.Option(False, help="Compare up to the shorter video (recorded)."),
    resample_audio: bool = typer.Option(False, help="Resample B's audio to A's rate (recorded)."),
):
    """Compare two runs or mp4 files (A is the reference): speed, accuracy, statistics, bitwise, attention calls."""
    from harness.compare.gates import check_gate, load_gate
    from harness.compare.inputs import compare_inputs
    from harness.report.comparison import format_comparison

    if fmt not in ("table", "md", "json"):
        raise UsageError(f"--format: expected table, md or json (got {fmt!r})")
    the_gate = load_gate(gate) if gate else None
    cmp = compare_inputs(run_a, run_b, truncate=truncate, resample_audio=resample_audio)
    violations = check_gate(cmp, the_gate) if the_gate is not None else []
    text = format_comparison(cmp, fmt)  # laid out already: printed as is, never re-wrapped or styled
    if fmt == "json":  # the gate's outcome travels with the numbers it judged
        data = json.loads(text)
        data["gate"] = (
            None
            if the_gate is None
            else {"file": str(gate), "passed": not violations and cmp.measured, "violations": violations}
        )
        text = json.dumps(data, indent=2) + "\n"
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    for problem in cmp.errors:
        say_err(f"error: {problem}")
    for v in violations:
        say_err(f"gate: {v}")
    if cmp.errors:  # unreadable or incompatible media
        raise typer.Exit(Exit.BAD_INPUT)
    if not cmp.measured:
        why = "; ".join(n.removeprefix("no accuracy metrics: ") for n in cmp.notes if "accuracy" in n)
        say_err(f"error: not measured: {why or 'no accuracy metrics'}")
        raise typer.Exit(Exit.RUN_FAILED)
    if violations:
        raise typer.Exit(Exit.GATE_FAILED)
    if the_gate is not None:
        err.print(f"gate {gate}: passed")


@app.command(epilog="Example: harness report reports/e2e_3step/3step")
def report(
    campaign: Path = typer.Argument(..., help="Campaign directory (or reports/<scenario> for its newest)."),
    single_file: bool | None = typer.Option(
        None,
        "--single-file/--with-assets",
        help="index.html with every image inlined (one file), or beside assets/ (default: the scenario's "
        "report.single_file, else beside assets/).",
    ),
):
    """Write report.md, pr.md, index.html, results.json and assets/ for a campaign."""
    from harness.report import build_report
    from harness.store import find_campaign

    paths = build_report(find_campaign(campaign), single_file=single_file)
    for label, path in paths.items():
        out.print(f"{label}: {path}", highlight=False)
    for problem in paths.errors:
        say_err(f"error: {problem}")
    if paths.errors:  # a run that could not be read or measured; the others are in the report
        raise typer.Exit(Exit.RUN_FAILED)


@app.command(
    epilog="Examples: harness ingest reports/h3/pr --arm torch_sdpa --role reference --mp4 sdpa.mp4 "
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
    attn_type: str | None = typer.Option(None, "--attn-type", help="Attention type (default: the config's)."),
    gpu: str | None = typer.Option(None, help="Where it ran, free text (shown in history)."),
    scenario: str | None = typer.Option(
        None, help="Scenario name of a new campaign (default: parent folder)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace arms already in the campaign."),
    build: bool = typer.Option(False, "--report", help="Build the campaign's report afterwards."),
):
    """Create or extend a campaign from existing outputs (mp4, LightX2V logs, config) made anywhere."""
    from harness.ingest import IngestArm, ingest_manifest
    from harness.ingest import ingest as do_ingest
    from harness.records import Role
    from harness.scenario import check_name, check_seed

    is_manifest = target.suffix.lower() in (".yaml", ".yml")
    if is_manifest:
        given = [f"--{n}" for n, v in (("arm", arm), ("mp4", mp4), ("config", config), ("log", log)) if v]
        if given:
            raise UsageError(f"{given[0]}: not with a manifest ({target} lists the arms)")
        result = ingest_manifest(target, force=force)
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
        one = IngestArm(name=arm, mp4=mp4, logs=log, config=config, role=Role(role), seed=seed,
                        attn_type=attn_type, gpu=gpu)  # fmt: skip
        result = do_ingest(target, [one], scenario=scenario, force=force)
    for line in result.lines:
        print(line)
    print(f"campaign: {result.campaign}")
    if build:
        from harness.report import build_report
        from harness.store import CampaignDir

        paths = build_report(CampaignDir(Path(result.campaign)))
        for label, path in paths.items():
            out.print(f"{label}: {path}", highlight=False)
        for problem in paths.errors:
            say_err(f"error: {problem}")
        if paths.errors:
            raise typer.Exit(Exit.RUN_FAILED)
    else:
        print(f"next: harness report {result.campaign}")


@app.command(
    epilog="Example: harness history reports/ci-builds --out reports/history --last 5 --gate   "
    "(exit 1: the newest campaign regressed against the ones before it)"
)
def history(
    dirs: list[Path] = typer.Argument(
        ..., help="Folders searched for results.json (campaigns, scenarios, builds)."
    ),
    out_dir: Path = typer.Option(
        Path("reports/history"), "--out", help="Where history.csv and history.html go."
    ),
    last: int = typer.Option(5, min=1, help="Each campaign is tested against the N campaigns before it."),
    gate: bool = typer.Option(
        False, "--gate", help="Exit 1 when the newest campaign regressed significantly."
    ),
):
    """Every results.json under the folders as one table over time: history.csv and history.html."""
    from harness.history import METRIC, find_moves, gate_regressions, load_history, write_history

    df = load_history(dirs)
    moves = find_moves(df, last=last)
    csv_path, html_path = write_history(df, moves, out_dir, last=last)
    print(
        f"{df['campaign_path'].nunique()} campaign(s), {len(df)} run(s), "
        f"scenario(s): {', '.join(df['scenario'].drop_duplicates())}"
    )
    moved = moves[moves["moved"]] if not moves.empty else moves
    for _, mv in moved.iterrows():
        word = "worse" if mv["worse"] else "better"
        print(
            f"moved ({word}): {mv['scenario']} {mv['arm']} {METRIC[mv['metric']].label} in {mv['campaign']}: {mv['text']}"
        )
    if moved.empty:
        print("no metric moved more than its noise (Welch's t-test, alpha 0.05)")
    print(f"history.csv: {csv_path}")
    print(f"history.html: {html_path}")
    if gate:
        regressions = gate_regressions(df, moves)
        for line in regressions:
            say_err(f"regression: {line}")
        if regressions:
            raise typer.Exit(Exit.GATE_FAILED)
        err.print(f"history gate: passed (newest campaign against the last {last})")


@scenarios_app.command("list")
def scenarios_list(folder: Path = typer.Option(Path("scenarios"), help="Folder to list.")):
    """List scenario files with their runner, arms and profiles."""
    from harness.scenario import list_scenarios, load_scenario

    table = Table()
    for col in ("file", "name", "kind", "runner", "arms", "profiles", "status"):
        table.add_column(col)
    for path in list_scenarios(folder):
        try:
            s = load_scenario(path)
            table.add_row(
                str(path), s.name, s.kind, s.runner or "-", str(len(s.arms)), ",".join(s.profiles), "ok"
            )
        except HarnessError as e:
            table.add_row(str(path), "-", "-", "-", "-", "-", f"[red]{e}[/]")
    out.print(table)


@scenarios_app.command("validate", epilog="Example: harness scenarios validate scenarios/e2e_3step.yaml")
def scenarios_validate(files: list[str] = typer.Argument(..., help="Scenario files.")):
    """Validate scenario files; the first problem of each is named with file, line and field."""
    from harness.plan import build_plan
    from harness.scenario import load_scenario

    bad = 0
    for f in files:
        try:
            s = load_scenario(f)
            if s.kind == "e2e":
                for profile in [None, *s.profiles]:
                    build_plan(s, profile=profile)
            out.print(f"{f}: ok ({s.kind}, {len(s.arms)} arms, profiles: {', '.join(s.profiles) or '-'})")
        except HarnessError as e:
            say_err(str(e))
            bad += 1
    if bad:
        raise typer.Exit(2)


@scenarios_app.command("schema", epilog="Example: harness scenarios schema --gate > gate.schema.json")
def scenarios_schema(
    gate: bool = typer.Option(False, "--gate", help="The schema of a gate file (compare --gate) instead."),
):
    """Print the scenario JSON Schema (for editors), or with --gate the gate file's."""
    if gate:
        from harness.compare.gates import gate_schema

        sys.stdout.write(json.dumps(gate_schema(), indent=2) + "\n")
        return
    from harness.scenario import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")


@app.command("env")
def env_cmd(as_json: bool = typer.Option(False, "--json", help="Print the full fingerprint as JSON.")):
    """Show the environment fingerprint recorded into every campaign."""
    from harness.envinfo import fingerprint, summary_lines

    fp = fingerprint()
    if as_json:
        sys.stdout.write(json.dumps(fp, indent=2) + "\n")
        return
    table = Table(show_header=False)
    for k, v in summary_lines(fp):
        table.add_row(k, v)
    out.print(table)


@app.command()
def backends():
    """List the attention backends: what each runs, whether it is available here (and why not)."""
    from harness.attention import availability, backend_class, list_backends

    table = Table()
    for col in ("backend", "runs", "available", "note"):
        table.add_column(col, overflow="fold")
    for name in list_backends():
        ok, why = availability(name)
        table.add_row(name, backend_class(name).description, "yes" if ok else "no", why)
    out.print(table)


@app.command(epilog="Example: harness kernels scenarios/kernels_smoke.yaml")
def kernels(
    scenario: str = typer.Argument(..., help="Scenario of kind `kernels`."),
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Root folder of results."),
):
    """Kernel-level accuracy and speed of attention backends on the model's shapes."""
    from harness.kernels.run import run_kernels_scenario

    paths = run_kernels_scenario(scenario, out_root=out_dir, console=err)
    for label, path in paths.items():
        out.print(f"{label}: {path}", highlight=False)


@bench_app.command("metrics", epilog="Example: harness bench metrics --frames 362")
def bench_metrics(
    workdir: Path = typer.Option(Path("reports/bench-metrics"), help="Where the test videos are made."),
    frames: int = typer.Option(362, help="Frames of the pair (the pull request's size: 362)."),
    height: int = typer.Option(768),
    width: int = typer.Option(1344),
    naive: bool = typer.Option(True, help="Also time the naive scikit-image loop."),
    double: bool = typer.Option(True, help="Also time a video twice as long."),
    device: str = typer.Option("cpu", help="cpu, cuda or auto: where the suite computes."),
    naive_frames: int = typer.Option(24, help="Frames the naive loop runs (fewer: extrapolated, marked ~)."),
    profile: bool | None = typer.Option(None, help="Time split of the CPU stages (default: on for cpu)."),
):
    """Time the full metric suite against a naive per-frame scikit-image loop, side by side."""
    from harness.bench import bench_metrics as run_bench

    result = run_bench(
        workdir, frames=frames, height=height, width=width, naive=naive, double=double,
        device=device, naive_frames=naive_frames, profile=profile,
    )  # fmt: skip
    sys.stdout.write(result.markdown() + "\n")


@lightx2v_app.command(
    "tiny-checkpoint", epilog="Example: harness lightx2v tiny-checkpoint /tmp/h3_tiny --root $LIGHTX2V_ROOT"
)
def lightx2v_tiny_checkpoint(
    out_dir: Path = typer.Argument(..., help="Empty or missing folder to write the checkpoint into."),
    root: Path = typer.Option(
        None, envvar="LIGHTX2V_ROOT", help="LightX2V checkout (its modules build the VAEs and vision tower)."
    ),
    preset: str = typer.Option(
        "tiny", help="tiny (CPU-sized DiT) or small (GPU-sized DiT, head_dim 128 in both)."
    ),
    seed: int = typer.Option(0, help="The checkpoint is a function of the seed."),
    python: str = typer.Option(None, help="Interpreter with LightX2V's dependencies (default: this one)."),
):
    """Write a synthetic MiniMax-H3 checkpoint (every folder ref2av loads, random weights, tiny sizes)."""
    from harness.runners.lightx2v.checkpoint import create_checkpoint

    if root is None:
        raise HarnessError("--root: no LightX2V checkout given (or set LIGHTX2V_ROOT)", exit_code=2)
    marker = create_checkpoint(out_dir, root, preset=preset, seed=seed, python=python)
    dit = marker["dit"]
    out.print(
        f"{out_dir}: synthetic MiniMax-H3 checkpoint, preset {preset}, seed {seed}: DiT hidden "
        f"{dit['hidden_size']}, {dit['num_attention_heads']} heads x {dit['attention_head_dim']}, "
        f"{dit['num_layers']} layers; {len(marker['files'])} files",
        highlight=False,
    )


@lightx2v_app.command(
    "overhead",
    epilog="Example: harness lightx2v overhead scenarios/minimax_h3_tiny.yaml --profile gpu --arm torch_sdpa",
)
def lightx2v_overhead(
    scenario: str = typer.Argument(..., help="A lightx2v scenario."),
    arm: str = typer.Option(..., help="The arm to time (not a K/V-reversed one)."),
    profile: str = typer.Option(None, help="Scenario profile."),
    repeats: int = typer.Option(4, help="Pairs of runs (launcher, bare), in ABBA order."),
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Root folder of results."),
):
    """DiT s/step with the harness's launcher against LightX2V uninstrumented, interleaved, with a t-test."""
    from harness.runners.lightx2v.overhead import measure_overhead

    result = measure_overhead(scenario, profile=profile, arm=arm, repeats=repeats, out_root=out_dir)
    sys.stdout.write(result.markdown())


@diffusers_app.command(
    "tiny-checkpoint", epilog="Example: harness diffusers tiny-checkpoint /tmp/ltx2_tiny --model ltx2"
)
def diffusers_tiny_checkpoint(
    out_dir: Path = typer.Argument(..., help="Empty or missing folder to write the pipeline into."),
    model: str = typer.Option(..., help="ltx2, wan2.1_t2v, wan2.2_t2v, wan2.1_i2v or wan2.2_i2v."),
    preset: str = typer.Option("tiny", help="tiny (CPU-sized) or small (GPU-sized: head dims 128/64)."),
    seed: int = typer.Option(0, help="The pipeline is a function of the seed."),
    python: str = typer.Option(None, help="Interpreter with diffusers and transformers (default: this one)."),
):
    """Write a synthetic diffusers pipeline folder (every component, random weights, offline)."""
    from harness.runners.diffusers.checkpoint import create_pipeline

    marker = create_pipeline(out_dir, model, preset=preset, seed=seed, python=python)
    out.print(
        f"{out_dir}: synthetic {model} pipeline, preset {preset}, seed {seed}; {len(marker['files'])} files",
        highlight=False,
    )


@diffusers_app.command(
    "probe", epilog="Example: harness diffusers probe --backend native --backend sage --device cuda"
)
def diffusers_probe(
    backend: list[str] = typer.Option(..., help="A dispatcher backend or harness backend (repeatable)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda[:N]."),
    dtype: str = typer.Option("auto", help="auto (bfloat16 on a GPU), float32, bfloat16 or float16."),
    head_dim: list[int] = typer.Option([128], help="Head dims of the test calls (repeatable)."),
):
    """The diffusers runner's pre-flight for some backends: usable here, and agreeing with exact attention?"""
    from harness.runners.diffusers.probe import probe_in_subprocess

    results = probe_in_subprocess([(b, {}) for b in backend], device=device, dtype=dtype, head_dims=head_dim)
    for r in results:
        cos = ", ".join(f"d{d} {c:.5f}" for d, c in (r.get("cosine") or {}).items())
        verdict = "ok" if r.get("ok") else f"unavailable: {r.get('reason')}"
        out.print(f"{r['attn_type']}: {verdict}{f' (cosine {cos})' if cos else ''}", highlight=False)
    if not all(r.get("ok") for r in results):
        raise typer.Exit(3)


def _sigterm(signum, frame):  # a scheduler's cancel becomes Ctrl-C: runs are recorded, not lost
    raise KeyboardInterrupt


def _is_click_error(exc: BaseException) -> bool:
    """A usage error from click, or from the copy of click that newer typer releases carry.

    Matched by class name along the MRO, so no version of either needs to be importable here.
    """
    return any(k.__name__ == "ClickException" for k in type(exc).__mro__) and hasattr(exc, "format_message")


def _usage_line(exc: BaseException) -> str:
    """One line: the command, then click's own words (which name the option or argument)."""
    ctx = getattr(exc, "ctx", None)
    where = getattr(ctx, "command_path", None) or "harness"
    message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
    return f"error: {where}: {message}"


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """The ``harness`` command (``args``: the command line after the program name; default sys.argv).

    Exit codes: see ``harness.errors`` (one contract for every command).
    """
    from harness.cli_startup import HANDLED

    signal.signal(signal.SIGTERM, _sigterm)
    if signal.SIGINT in HANDLED:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rc = app(args=args, prog_name=prog_name or "harness", standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except HarnessError as e:
        say_err(f"error: {' '.join(str(e).split())}")
        sys.exit(int(e.exit_code))
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(Exit.INTERRUPTED)
    except typer.Exit as e:
        sys.exit(int(e.exit_code))
    except SystemExit:
        raise
    except Exception as e:
        if _is_click_error(e):
            say_err(_usage_line(e))
            sys.exit(Exit.BAD_INPUT)
        if type(e).__name__ == "Abort":  # click turns Ctrl-C inside a command into Abort
            err.print("interrupted")
            sys.exit(Exit.INTERRUPTED)
        if type(e).__name__ == "Exit":  # click's own, from an older typer
            sys.exit(int(getattr(e, "exit_code", 0)))
        import traceback

        traceback.print_exc()
        say_err(f"error: internal error in harness (a bug; the traceback is above): {type(e).__name__}: {e}")
        sys.exit(Exit.INTERNAL)


if __name__ == "__main__":
    main()
