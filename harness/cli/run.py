"""``harness run``: plan a scenario's campaign, show it (``--dry-run``) or execute it with progress
bars, then print the run table, the report's paths and what went wrong."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from harness.cli import common
from harness.cli.common import err, out, parse_names, parse_seeds, say_err, say_interrupted, waiting_line
from harness.errors import Exit, visible

EPILOG = (
    "Example: harness run scenarios/e2e_3step.yaml --profile 3step   "
    "(resumes: arms already ok with the same spec are skipped; --force re-runs them)"
)


def parse_repeats(text: str) -> int | str:
    """--repeats N (1 or more) or auto."""
    if text != "auto" and not (text.isdecimal() and int(text) >= 1):
        raise typer.BadParameter(f"expected a number of runs (1 or more) or auto (got {text!r})")
    return text if text == "auto" else int(text)


def run(
    scenario: str = typer.Argument(..., help="Scenario YAML file (or a name under scenarios/)."),
    profile: str | None = typer.Option(None, "--profile", "-p", help="Profile from the scenario."),
    arms: str | None = typer.Option(None, help="Comma-separated arm names (default: all)."),
    seeds: str | None = typer.Option(None, help="Comma-separated seeds (default: the scenario's)."),
    inputs: str | None = typer.Option(None, help="Comma-separated input names (default: the scenario's)."),
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
    repeats: str | None = typer.Option(
        None,
        "--repeats",
        parser=parse_repeats,
        metavar="<int|auto>",
        help="Runs per arm and seed, interleaved (default: the scenario's repeats); auto: rounds until every "
        "speed-up interval is narrow enough, as `repeats: auto` in the scenario.",
    ),
):
    """Run a scenario's arms (a campaign), then write its report."""
    from harness.campaign import dry_run as show_plan
    from harness.campaign import execute, lock_campaign, plan_campaign

    given = {"partition": partition, "account": account, "time_min": time_min, "gpus_per_node": gpus}
    # Every bad input is one line here, before anything is written or any progress bar is drawn.
    plan = plan_campaign(
        scenario, profile=profile, arms=parse_names(arms, "--arms"), seeds=parse_seeds(seeds),
        inputs=parse_names(inputs, "--inputs"), out_root=out_dir,
        campaign_id=campaign, executor=executor, resubmit_failed=resubmit_failed, repeats=repeats,
        slurm_overrides={k: v for k, v in given.items() if v is not None}, force=force,
        check_executor=not dry_run,
    )  # fmt: skip
    if dry_run:
        print_dry_run(show_plan(plan))
        return
    # A campaign another run holds: one line, exit 2; a report or an ingest in progress: waited for.
    lock = lock_campaign(plan.campaign, on_wait=waiting_line(plan.campaign.path, "the run starts"))
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    ) as progress:
        outcome = execute(plan, lock=lock, reporter=RichReporter(progress, total=0), report=not no_report)
    out.print(summary_table(outcome))
    for rec in outcome.records:
        if rec.reason:
            out.print(visible(f"{rec.spec.key}: {rec.reason}"), highlight=False, markup=False, soft_wrap=True)
    if outcome.report_paths is not None:
        common.print_paths(outcome.report_paths)
    if outcome.interrupted:
        say_interrupted("interrupted: finished runs are kept; run the same command again to resume")
        raise typer.Exit(Exit.INTERRUPTED)
    failed_keys = {r.spec.key for r in outcome.failed}  # named once, on the line below the errors
    problems = outcome.damaged + [
        e
        for e in [*getattr(outcome.report_paths, "errors", ()), *filter(None, [outcome.report_error])]
        if not (e.endswith(": not measured") and e.split(": ", 1)[0] in failed_keys)
    ]
    for problem in problems:
        say_err(f"error: {problem}")
    if outcome.failed:
        keys = ", ".join(r.spec.key for r in outcome.failed)
        say_err(f"{len(outcome.failed)} run(s) did not finish ok or are invalid: {keys}")
    if outcome.failed or problems:
        raise typer.Exit(Exit.RUN_FAILED)


def print_dry_run(dry) -> None:
    """Plain lines, never wrapped: the commands are meant to be copied."""
    print(f"campaign: {dry.campaign.path}  (dry run: nothing is executed)")
    for note in dry.notes:
        print(note)
    if dry.held_by is not None:
        held = dry.held_by.describe()
        print(f"note: another harness run holds this campaign ({held}); a real run now would exit 2")
    for e in dry.entries:
        note = f"  [would be skipped: {e.preflight}]" if e.preflight else ""
        print(f"\n# {e.key}: {e.action} ({e.why}){note}")
        print(e.shell())


def summary_table(outcome):
    """One row per run; a "from" column when some rows were not made by this invocation."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(visible(f"campaign {outcome.campaign.path}")), title_justify="left")
    mixed = outcome.mixed_provenance
    for col in ("run", "role", "status", "valid", "s/step", "total s") + (("from",) if mixed else ()):
        table.add_column(col, no_wrap=True)
    for row in outcome.summary_rows():
        sps = f"{row.s_per_step:.4f}" if row.s_per_step is not None else "-"
        tot = f"{row.pipeline_total_s:.2f}" if row.pipeline_total_s is not None else "-"
        valid = "-" if row.valid is None else ("yes" if row.valid else "NO")
        cells = [row.key, row.role, row.status, valid, sps, tot, *([row.provenance] if mixed else [])]
        table.add_row(*(Text(visible(c)) for c in cells))
    return table


class RichReporter:
    """A campaign Reporter drawn with rich: progress over arms and the running arm's steps."""

    def __init__(self, progress, total: int):
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
        status = record.status.value
        mark = {"ok": "[green]ok[/]", "skipped": "[yellow]skipped[/]"}.get(status, f"[red]{status}[/]")
        extra = f" - {escape(visible(record.reason))}" if record.reason else ""
        self.progress.console.print(f"  {record.spec.key}: {mark}{extra}", markup=True, highlight=False)

    def message(self, text):
        self.progress.console.print(visible(text), soft_wrap=True, markup=False, highlight=False)  # one line
