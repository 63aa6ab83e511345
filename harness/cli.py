"""The `harness` command: a thin typer layer; every command calls one library function."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.errors import HarnessError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="A/B benchmark and accuracy harness for attention backends in video+audio generation.",
)
scenarios_app = typer.Typer(no_args_is_help=True, help="List, validate and describe scenario files.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks of the harness itself.")
app.add_typer(scenarios_app, name="scenarios")
app.add_typer(bench_app, name="bench")
lightx2v_app = typer.Typer(
    no_args_is_help=True, help="Tools for the real LightX2V (synthetic checkpoint, overhead)."
)
app.add_typer(lightx2v_app, name="lightx2v")

out = Console()
err = Console(stderr=True)


def say_err(text: str) -> None:
    """One plain line on stderr (never wrapped or styled: it is meant to be grepped)."""
    print(text, file=sys.stderr, flush=True)


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


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
        self.progress.console.print(text)


def _summary_table(outcome) -> Table:
    table = Table(title=f"campaign {outcome.campaign.path}", title_justify="left")
    for col in ("run", "role", "status", "valid", "s/step", "total s"):
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
        table.add_row(rec.spec.key, rec.spec.role.value, rec.status.value, valid, sps, tot)
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
        None, "--repeats", help="Runs per arm and seed, interleaved (default: the scenario's repeats)."
    ),
):
    """Run a scenario's arms (a campaign), then write its report."""
    from harness.campaign import run_campaign

    seed_list = [int(s) for s in _csv(seeds)] if seeds else None
    given = {"partition": partition, "account": account, "time_min": time_min, "gpus_per_node": gpus}
    slurm_overrides = {k: v for k, v in given.items() if v is not None}
    if dry_run:
        outcome = run_campaign(
            scenario, profile=profile, arms=_csv(arms), seeds=seed_list, out_root=out_dir,
            campaign_id=campaign, force=force, dry_run=True, executor=executor, repeats=repeats,
        )  # fmt: skip
        # Plain lines, never wrapped: the commands are meant to be copied.
        print(f"campaign: {outcome.campaign.path}  (dry run: nothing is executed)")
        for e in outcome.dry_run:
            note = f"  [would be skipped: {e.preflight}]" if e.preflight else ""
            print(f"\n# {e.key}: {e.action} ({e.why}){note}")
            print(e.shell())
        return
    from harness.scenario import load_scenario

    load_scenario(scenario)  # a bad scenario is one line, before any progress bar
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    ) as progress:
        reporter = RichReporter(progress, total=0)
        outcome = run_campaign(
            scenario, profile=profile, arms=_csv(arms), seeds=seed_list, out_root=out_dir,
            campaign_id=campaign, force=force, executor=executor, report=not no_report, reporter=reporter,
            slurm_overrides=slurm_overrides, resubmit_failed=resubmit_failed, repeats=repeats,
        )  # fmt: skip
    out.print(_summary_table(outcome))
    for note in _notes(outcome):
        out.print(note, highlight=False, markup=False, soft_wrap=True)
    if outcome.report_paths is not None:
        for label, path in outcome.report_paths.items():
            out.print(f"{label}: {path}", highlight=False)
    if outcome.interrupted:
        err.print("interrupted: finished runs are kept; run the same command again to resume")
        raise typer.Exit(130)
    for problem in getattr(outcome.report_paths, "errors", ()):
        say_err(f"error: {problem}")
    if outcome.report_error:
        say_err(f"error: {outcome.report_error}")
        raise typer.Exit(1)
    if getattr(outcome.report_paths, "errors", ()):
        raise typer.Exit(1)
    if outcome.failed:
        err.print(
            f"{len(outcome.failed)} run(s) did not finish ok: "
            + ", ".join(r.spec.key for r in outcome.failed)
        )
        raise typer.Exit(1)


@app.command(
    epilog="Example: harness compare reports/e2e_3step/3step:torch_sdpa reports/e2e_3step/3step:sage_emul_aiter"
)
def compare(
    run_a: str = typer.Argument(..., help="Reference run: a run directory or CAMPAIGN:ARM."),
    run_b: str = typer.Argument(..., help="Run compared against A."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, md or json."),
    gate: Path | None = typer.Option(None, help="YAML/JSON thresholds; exit 1 when one is violated."),
    truncate: bool = typer.Option(False, help="Compare up to the shorter video (recorded)."),
    resample_audio: bool = typer.Option(False, help="Resample B's audio to A's rate (recorded)."),
):
    """Compare two runs (A is the reference): speed, accuracy, statistics, bitwise, attention calls."""
    from harness.compare.gates import check_gate, load_gate
    from harness.compare.pairwise import compare_runs
    from harness.report.comparison import format_comparison
    from harness.store import resolve_run_dir

    if fmt not in ("table", "md", "json"):
        raise HarnessError(f"--format: expected table, md or json (got {fmt!r})", exit_code=2)
    the_gate = load_gate(gate) if gate else None
    a, b = resolve_run_dir(run_a), resolve_run_dir(run_b)
    cmp = compare_runs(a, b, truncate=truncate, resample_audio=resample_audio)
    text = format_comparison(cmp, fmt)  # laid out already: printed as is, never re-wrapped or styled
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    for problem in cmp.errors:
        say_err(f"error: {problem}")
    if cmp.errors:
        raise typer.Exit(1)
    if the_gate is not None:
        violations = check_gate(cmp, the_gate)
        for v in violations:
            say_err(f"gate: {v}")
        if violations:
            raise typer.Exit(1)
        err.print(f"gate {gate}: passed")


@app.command(epilog="Example: harness report reports/e2e_3step/3step")
def report(
    campaign: Path = typer.Argument(..., help="Campaign directory (or reports/<scenario> for its newest)."),
):
    """Write report.md, index.html, results.json and assets/ for a campaign."""
    from harness.report import build_report
    from harness.store import find_campaign

    paths = build_report(find_campaign(campaign))
    for label, path in paths.items():
        out.print(f"{label}: {path}", highlight=False)
    for problem in paths.errors:
        say_err(f"error: {problem}")
    if paths.errors:
        raise typer.Exit(1)


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


@scenarios_app.command("schema")
def scenarios_schema():
    """Print the scenario JSON Schema (for editors)."""
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


def _sigterm(signum, frame):  # a scheduler's cancel becomes Ctrl-C: runs are recorded, not lost
    raise KeyboardInterrupt


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """The ``harness`` command (``args``: the command line after the program name; default sys.argv)."""
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        rc = app(args=args, prog_name=prog_name, standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except HarnessError as e:
        say_err(f"error: {e}")
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
